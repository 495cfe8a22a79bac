"""Python bindings of grove, a topology-aware collective-communication library.

Sub-packages:
    grove.torch  -- the "grove" backend of torch.distributed (import it to register).
"""

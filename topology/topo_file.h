// Topology files: grove's JSON format (docs/topology-format.md) and import
// of NCCL's topology XML (the files NCCL_TOPO_DUMP_FILE writes).
//
// How it works: a JSON document lists machines, each with nodes and links
// (links are bidirectional unless written with "from"/"to"). Loading builds a
// fresh Graph; applying an "override": true document edits an existing graph
// instead (add, change or remove nodes and links by name), which is how a
// user fixes one wrong fact of a detected machine. NCCL XML is walked as
// NCCL writes it: <system> -> <cpu> -> nested <pci> bridges -> <pci> holding a
// <gpu> (with <nvlink> children) or a <nic> (with <net> children); every
// <pci> gives a PCIe link with the generation and width of its link_speed /
// link_width, every <nvlink> a directed NVLink, every <net> a NIC node tied
// to a network node by its speed. Errors name the file, line and element.
#pragma once

#include <string>

#include "topology/graph.h"

namespace grove::topo {

/// Serialises the whole graph in grove's JSON format (pretty-printed).
std::string toJson(const Graph& g);
/// Builds a graph from a JSON document (an "override" document is applied to an empty graph).
Graph fromJson(const std::string& text, const std::string& source);
/// Applies a JSON document to `g`: an "override": true document edits it; a
/// full description replaces the machines it names (and adds new ones).
void applyJson(Graph& g, const std::string& text, const std::string& source);
/// Whether a JSON document is an override (partial) description.
bool isOverrideJson(const std::string& text, const std::string& source);

/// Builds a one-machine graph from NCCL topology XML; the machine is named `host`.
Graph fromNcclXml(const std::string& text, const std::string& source, const std::string& host);

/// Reads a file; throws grove::Error(SystemError) naming it when it cannot be read.
std::string readTextFile(const std::string& path);
/// Writes a file; throws grove::Error(SystemError) naming it on failure.
void writeTextFile(const std::string& path, const std::string& text);
/// True when the text (or the path's extension) looks like XML rather than JSON.
bool looksLikeXml(const std::string& path, const std::string& text);
/// Loads a JSON or NCCL XML file (by content / extension) into a new graph.
/// NCCL XML machines are named after the file's stem.
Graph loadTopologyFile(const std::string& path);

}  // namespace grove::topo

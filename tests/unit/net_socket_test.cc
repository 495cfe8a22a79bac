// Socket utilities: interface matching, address parsing, connect/accept/transfer.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netdb.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "base/error.h"
#include "base/socket.h"

namespace grove::net {
namespace {

Interface itf(const char* name, const char* ip) {
  Interface i;
  i.name = name;
  if (std::strchr(ip, ':') != nullptr) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&i.addr);
    s->sin6_family = AF_INET6;
    inet_pton(AF_INET6, ip, &s->sin6_addr);
  } else {
    auto* s = reinterpret_cast<sockaddr_in*>(&i.addr);
    s->sin_family = AF_INET;
    inet_pton(AF_INET, ip, &s->sin_addr);
  }
  return i;
}

std::vector<std::string> names(const std::vector<Interface>& v) {
  std::vector<std::string> out;
  for (auto& i : v) out.push_back(i.name + "/" + formatHost(i.addr));
  return out;
}

}  // namespace

TEST(SocketIfname, PrefixExcludeAndExactRules) {
  EXPECT_TRUE(ifnameMatches("eth", "eth0"));
  EXPECT_FALSE(ifnameMatches("eth", "ib0"));
  EXPECT_TRUE(ifnameMatches("eth,ib", "ib1"));
  EXPECT_TRUE(ifnameMatches("eth0:1234", "eth0"));
  EXPECT_FALSE(ifnameMatches("^docker", "docker0"));
  EXPECT_TRUE(ifnameMatches("^docker", "eth0"));
  EXPECT_FALSE(ifnameMatches("^docker,lo", "lo"));
  EXPECT_TRUE(ifnameMatches("=eth0", "eth0"));
  EXPECT_FALSE(ifnameMatches("=eth0", "eth01"));
  EXPECT_TRUE(ifnameMatches("^=eth0", "eth01"));
  EXPECT_FALSE(ifnameMatches("^=eth0", "eth0"));
  EXPECT_FALSE(ifnameMatches("", "eth0"));
}

TEST(SocketIfname, DefaultPreferenceAndFamily) {
  std::vector<Interface> all = {itf("lo", "127.0.0.1"), itf("docker0", "172.17.0.1"),
                                itf("eth0", "fd00::2"), itf("eth0", "10.0.0.1"),
                                itf("virbr0", "192.168.122.1")};
  EXPECT_EQ(names(selectInterfaces(all, "", AF_UNSPEC)), std::vector<std::string>{"eth0/10.0.0.1"});
  EXPECT_EQ(names(selectInterfaces(all, "", AF_INET6)), std::vector<std::string>{"eth0/fd00::2"});
  EXPECT_EQ(names(selectInterfaces(all, "=lo", AF_UNSPEC)),
            std::vector<std::string>{"lo/127.0.0.1"});
  EXPECT_EQ(names(selectInterfaces(all, "^eth,lo", AF_UNSPEC)),
            (std::vector<std::string>{"docker0/172.17.0.1", "virbr0/192.168.122.1"}));
  std::vector<Interface> dockerOnly = {itf("lo", "127.0.0.1"), itf("docker0", "172.17.0.1")};
  EXPECT_EQ(names(selectInterfaces(dockerOnly, "", AF_UNSPEC)),
            std::vector<std::string>{"docker0/172.17.0.1"});
  std::vector<Interface> loOnly = {itf("lo", "127.0.0.1")};
  EXPECT_EQ(names(selectInterfaces(loOnly, "", AF_UNSPEC)),
            std::vector<std::string>{"lo/127.0.0.1"});
  all.push_back(itf("ib0", "10.1.0.1"));
  EXPECT_EQ(names(selectInterfaces(all, "", AF_UNSPEC)), std::vector<std::string>{"ib0/10.1.0.1"});
  EXPECT_TRUE(selectInterfaces(all, "nosuch", AF_UNSPEC).empty());
  EXPECT_FALSE(listInterfaces().empty());  // at least lo
}

TEST(SocketAddress, ParseHostPort) {
  auto hp = parseHostPort("node1:1234");
  EXPECT_EQ(hp.host, "node1");
  EXPECT_EQ(hp.port, 1234);
  hp = parseHostPort("[fe80::1]:99");
  EXPECT_EQ(hp.host, "fe80::1");
  EXPECT_EQ(hp.port, 99);
  hp = parseHostPort("::1");
  EXPECT_EQ(hp.host, "::1");
  EXPECT_EQ(hp.port, -1);
  hp = parseHostPort("10.0.0.1");
  EXPECT_EQ(hp.port, -1);
  for (const char* bad : {"", "[::1", "host:", "host:70000", "host:abc", ":80", "[::1]x"}) {
    try {
      parseHostPort(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), groveInvalidArgument) << bad;
    }
  }
}

TEST(SocketAddress, ResolveAndFormat) {
  EXPECT_EQ(formatAddress(resolveAddress("127.0.0.1:80")), "127.0.0.1:80");
  EXPECT_EQ(formatAddress(resolveAddress("[::1]:7")), "[::1]:7");
  // Host names resolve where the machine can (a bare root without
  // /etc/hosts cannot even resolve "localhost").
  addrinfo* found = nullptr;
  if (getaddrinfo("localhost", nullptr, nullptr, &found) == 0) {
    freeaddrinfo(found);
    EXPECT_EQ(addressPort(resolveAddress("localhost:5")), 5);
  } else {
    std::printf(
        "this machine cannot resolve localhost (no /etc/hosts?): name lookup not checked\n");
  }
  EXPECT_EQ(addressPort(resolveAddress("127.0.0.1", 9)), 9);
  EXPECT_THROW(resolveAddress("127.0.0.1"), Error);  // no port
  EXPECT_THROW(resolveAddress("no-such-host.invalid:1"), Error);
  sockaddr_storage none{};
  EXPECT_EQ(formatAddress(none), "<none>");
  EXPECT_FALSE(addressUsable(none));
}

TEST(SocketIo, ListenConnectTransfer) {
  sockaddr_storage addr = resolveAddress("127.0.0.1:0");
  Fd listener = listenOn(addr);
  ASSERT_NE(addressPort(addr), 0);
  std::vector<char> big(3 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  std::thread client([&] {
    Fd c = connectUntil(addr, Deadline::in(5));
    EXPECT_EQ(sendAll(c.get(), big.data(), big.size(), Deadline::in(10)), IoResult::kOk);
  });
  Fd s = acceptUntil(listener.get(), Deadline::in(5));
  ASSERT_TRUE(s.valid());
  std::vector<char> got(big.size());
  EXPECT_EQ(recvAll(s.get(), got.data(), got.size(), Deadline::in(10)), IoResult::kOk);
  client.join();
  EXPECT_EQ(got, big);
  char b;
  EXPECT_EQ(recvAll(s.get(), &b, 1, Deadline::in(5)), IoResult::kClosed);
}

TEST(SocketIo, TimeoutsRetriesAndAbort) {
  sockaddr_storage addr = resolveAddress("127.0.0.1:0");
  Fd listener = listenOn(addr);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(acceptUntil(listener.get(), Deadline::in(0.2)).valid());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(190));
  listener.reset();  // nobody listens now: connect is refused until the deadline
  try {
    connectUntil(addr, Deadline::in(0.3));
    ADD_FAILURE() << "connected to nothing";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), groveRemoteError);
  }
  // The listener appears late: connect keeps retrying and succeeds.
  Fd accepted;  // kept open so the abort, not EOF, ends the receive below
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    sockaddr_storage a = addr;
    Fd l = listenOn(a);
    accepted = acceptUntil(l.get(), Deadline::in(5));
    EXPECT_TRUE(accepted.valid());
  });
  Fd c = connectUntil(addr, Deadline::in(5));
  EXPECT_TRUE(c.valid());
  late.join();
  std::atomic<bool> flag{true};
  std::string why = "stop now";
  char b;
  try {
    recvAll(c.get(), &b, 1, Deadline::in(5), AbortView{&flag, &why});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "stop now");
  }
}

// Each direction's kernel buffer is set on its own; 0 leaves it alone. (The
// kernel doubles what it is given, up to net.core.{w,r}mem_max.)
TEST(SocketIo, BufferSizesAreSetPerDirection) {
  Fd fd(::socket(AF_INET, SOCK_STREAM, 0));
  ASSERT_GE(fd.get(), 0);
  auto get = [&](int option) {
    int v = 0;
    socklen_t len = sizeof(v);
    EXPECT_EQ(getsockopt(fd.get(), SOL_SOCKET, option, &v, &len), 0);
    return v;
  };
  const int rcv0 = get(SO_RCVBUF), snd0 = get(SO_SNDBUF);
  setBufferSizes(fd.get(), 90000, 0);
  EXPECT_EQ(get(SO_RCVBUF), rcv0);
  const int snd = get(SO_SNDBUF);
  EXPECT_NE(snd, snd0);
  EXPECT_GE(snd, 90000);
  setBufferSizes(fd.get(), 0, 100000);
  EXPECT_EQ(get(SO_SNDBUF), snd);
  EXPECT_NE(get(SO_RCVBUF), rcv0);
  EXPECT_GE(get(SO_RCVBUF), 100000);
}

}  // namespace grove::net

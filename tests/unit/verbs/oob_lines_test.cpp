// rocemu perf's line exchange (oob::LineConn) over a socket pair: lines that
// arrive in pieces, nothing yet, the peer closing, and a wait that times out
// while its idle callback keeps running.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tools/rocemu/oob.hpp"

namespace rocemu::oob {
namespace {

struct Pair {
    int fd[2] = {-1, -1};
    Pair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fd), 0); }
};

TEST(OobLines, LinesArriveWholeWhateverTheirPieces) {
    Pair p;
    LineConn a(p.fd[0]);
    std::string line, error;
    EXPECT_EQ(a.try_recv(line, error), 0);  // nothing sent yet
    ASSERT_EQ(::write(p.fd[1], "HELLO rocemu", 12), 12);
    EXPECT_EQ(a.try_recv(line, error), 0);  // no newline yet
    ASSERT_EQ(::write(p.fd[1], "-perf/1 write\nQP 0 ab\nREA", 25), 25);
    ASSERT_EQ(a.try_recv(line, error), 1);
    EXPECT_EQ(line, "HELLO rocemu-perf/1 write");
    ASSERT_EQ(a.try_recv(line, error), 1);
    EXPECT_EQ(line, "QP 0 ab");
    EXPECT_EQ(a.try_recv(line, error), 0);  // "REA" waits for the rest
    ::close(p.fd[1]);
    EXPECT_EQ(a.try_recv(line, error), -1);
    EXPECT_EQ(error, "the peer closed the connection");
}

TEST(OobLines, APeerThatNeverSendsANewlineIsRefusedNotBuffered) {
    Pair p;
    LineConn a(p.fd[0]);
    std::string line, error;
    const std::string chunk(4096, 'x');
    int r = 0;
    size_t sent = 0;
    while (r == 0 && sent <= 2 * LineConn::kMaxLine) {
        ASSERT_EQ(::write(p.fd[1], chunk.data(), chunk.size()), static_cast<ssize_t>(chunk.size()));
        sent += chunk.size();
        r = a.try_recv(line, error);
    }
    EXPECT_EQ(r, -1);
    EXPECT_LE(sent, LineConn::kMaxLine + chunk.size());
    EXPECT_NE(error.find("without a newline (a line is at most 65536)"), std::string::npos) << error;
    ::close(p.fd[1]);
}

TEST(OobLines, SentLinesAreReadBack) {
    Pair p;
    LineConn a(p.fd[0]), b(p.fd[1]);
    std::string line, error;
    ASSERT_TRUE(a.send("READY", error)) << error;
    int idles = 0;
    ASSERT_TRUE(b.recv(line, Nanos::from_s(5), error, [&] { ++idles; })) << error;
    EXPECT_EQ(line, "READY");
}

TEST(OobLines, AWaitTimesOutAndKeepsTheNicTurning) {
    Pair p;
    LineConn a(p.fd[0]);
    std::string line, error;
    int idles = 0;
    EXPECT_FALSE(a.recv(line, Nanos::from_ms(50), error, [&] { ++idles; }));
    EXPECT_GT(idles, 10);
    EXPECT_EQ(error, "no answer from the peer within 0.1 s");
    ::close(p.fd[1]);
}

TEST(OobLines, AcceptWithoutAClientSaysSo) {
    std::string error;
    EXPECT_EQ(accept_lines(0, Nanos::from_ms(100), error), nullptr);
    EXPECT_NE(error.find("no client connected to TCP port 0 within 0.1 s"), std::string::npos) << error;
}

}  // namespace
}  // namespace rocemu::oob

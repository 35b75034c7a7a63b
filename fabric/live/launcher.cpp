// Starts the nodes of a split live fabric and waits for them (node.hpp).
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "dataplane/dpdk/runtime_base.hpp"
#include "fabric/live/monotonic.hpp"
#include "fabric/live/node.hpp"

namespace rocemu::fabric::live {

namespace {

constexpr Nanos kWaitStep = Nanos::from_ms(20);

volatile std::sig_atomic_t g_interrupted = 0;
void on_interrupt(int sig) { g_interrupted = sig; }

struct Child {
    pid_t pid = -1;
    bool running = false;
    int status = 0;
};

double seconds_since(int64_t t0_ns) { return static_cast<double>(monotonic_ns() - t0_ns) / 1e9; }

void pause_step() {
    const timespec ts{0, static_cast<long>(kWaitStep.v)};
    nanosleep(&ts, nullptr);
}

std::string describe(int status) {
    if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
    if (WIFSIGNALED(status))
        return fmt::format("was killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
    return "stopped";
}

// The last `n` lines of a node's log, indented, for the error message.
std::string tail(const std::string& path, size_t n) {
    std::ifstream f(path);
    std::vector<std::string> lines;
    for (std::string l; std::getline(f, l);) {
        lines.push_back(l);
        if (lines.size() > n) lines.erase(lines.begin());
    }
    std::string out;
    for (const std::string& l : lines) out += "\n    " + l;
    return out.empty() ? "" : fmt::format("\n  last lines of {}:{}", path, out);
}

pid_t start(const NodeCommand& n) {
    const pid_t parent = getpid();
    // Blocked across the fork: a SIGTERM that reaches the child before its
    // default action is back stays pending instead of landing, lost, in the
    // launcher's handler.
    sigset_t stops, old;
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT);
    sigaddset(&stops, SIGTERM);
    sigprocmask(SIG_BLOCK, &stops, &old);
    const pid_t pid = fork();
    if (pid != 0) {
        sigprocmask(SIG_SETMASK, &old, nullptr);
        return pid;
    }
    // The child: dies with the launcher, whatever kills it.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    if (!n.log.empty()) {
        const int fd = open(n.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) _exit(126);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
    }
    std::vector<char*> argv;
    for (const std::string& a : n.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
}

// Reaps every child that has exited.
void reap(std::vector<Child>& kids) {
    for (Child& c : kids) {
        if (!c.running) continue;
        int st = 0;
        if (waitpid(c.pid, &st, WNOHANG) == c.pid) {
            c.running = false;
            c.status = st;
        }
    }
}

// SIGTERM to every running child, SIGKILL to those still there after the
// grace; returns the indices of those.
std::vector<size_t> stop_all(std::vector<Child>& kids) {
    for (const Child& c : kids)
        if (c.running) kill(c.pid, SIGTERM);
    const int64_t t0 = monotonic_ns();
    for (;;) {
        reap(kids);
        bool any = false;
        for (const Child& c : kids) any = any || c.running;
        if (!any) return {};
        if (seconds_since(t0) > kNodeStopGrace.seconds()) break;
        pause_step();
    }
    std::vector<size_t> killed;
    for (size_t i = 0; i < kids.size(); ++i) {
        if (!kids[i].running) continue;
        kill(kids[i].pid, SIGKILL);
        killed.push_back(i);
    }
    for (Child& c : kids)
        if (c.running && waitpid(c.pid, &c.status, 0) == c.pid) c.running = false;
    return killed;
}

}  // namespace

LaunchResult launch_nodes(const std::vector<NodeCommand>& nodes, double timeout_s) {
    LaunchResult r;
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    struct sigaction old_int {}, old_term {};
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    g_interrupted = 0;

    std::vector<Child> kids(nodes.size());
    const int64_t t0 = monotonic_ns();
    for (size_t i = 0; i < nodes.size(); ++i) {
        kids[i].pid = start(nodes[i]);
        kids[i].running = kids[i].pid > 0;
        if (!kids[i].running) {
            r.error = fmt::format("cannot start node {}: {}", nodes[i].name, std::strerror(errno));
            break;
        }
    }
    while (r.error.empty()) {
        reap(kids);
        if (!kids.front().running) break;
        for (size_t i = 1; i < kids.size() && r.error.empty(); ++i)
            if (!kids[i].running)
                r.error = fmt::format("node {} (pid {}) {} before the run ended{}", nodes[i].name, kids[i].pid,
                                      describe(kids[i].status), tail(nodes[i].log, 5));
        if (!r.error.empty()) break;
        if (g_interrupted) {
            r.error = fmt::format("interrupted by signal {} ({}): stopped every node", static_cast<int>(g_interrupted),
                                  strsignal(g_interrupted));
            break;
        }
        if (seconds_since(t0) > timeout_s) {
            std::string still;
            for (size_t i = 0; i < kids.size(); ++i)
                if (kids[i].running) still += (still.empty() ? "" : ", ") + nodes[i].name;
            r.error = fmt::format("timed out after {:.0f} s; still running: {}", timeout_s, still);
            break;
        }
        pause_step();
    }
    for (const size_t i : stop_all(kids))
        r.killed_after_grace.push_back(fmt::format("{} (pid {})", nodes[i].name, kids[i].pid));
    // A node ended by a signal (killed, crashed, or SIGKILL after the grace)
    // could not remove its EAL runtime folder: with rocemu's own prefix
    // (rocemu-<pid>) it is this node's alone, so it goes here.
    for (size_t i = 0; i < kids.size(); ++i) {
        if (!nodes[i].own_eal_prefix || kids[i].pid <= 0 || kids[i].running || !WIFSIGNALED(kids[i].status))
            continue;
        std::error_code ec;
        std::filesystem::remove_all(dpdk::dpdk_runtime_base() / fmt::format("rocemu-{}", kids[i].pid), ec);
    }
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    if (!r.error.empty()) {
        r.status = 2;
        return r;
    }
    const int first = kids.front().status;
    // 0 or 1: the hosts node ran the sweep to its end (1: a size failed);
    // anything else, it gave up early, and the other nodes were stopped
    // because of it (some before their SIGTERM handler was in place): their
    // status says nothing.
    if (!WIFEXITED(first) || WEXITSTATUS(first) > 1) {
        r.status = 2;
        r.error = fmt::format("node {} (pid {}) {}{}", nodes.front().name, kids.front().pid, describe(first),
                              tail(nodes.front().log, 5));
        return r;
    }
    r.status = WEXITSTATUS(first);
    for (size_t i = 1; i < kids.size(); ++i)
        if (!WIFEXITED(kids[i].status) || WEXITSTATUS(kids[i].status) != 0) {
            r.status = 2;
            r.error = fmt::format("node {} (pid {}) {} when stopped{}", nodes[i].name, kids[i].pid,
                                  describe(kids[i].status), tail(nodes[i].log, 5));
            return r;
        }
    return r;
}

}  // namespace rocemu::fabric::live

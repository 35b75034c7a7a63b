#include "tools/rocemu/crash.hpp"

#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace rocemu::cli {
namespace {

const char* g_prog = "rocemu";
constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
alignas(16) char g_alt_stack[64 * 1024];

// Only async-signal-safe calls from here on: write(2), no stdio, no malloc.
void put(const char* s) {
    size_t n = std::strlen(s);
    while (n > 0) {
        const ssize_t w = ::write(STDERR_FILENO, s, n);
        if (w <= 0) return;
        s += w;
        n -= static_cast<size_t>(w);
    }
}

void put_number(uint64_t v, unsigned base) {
    char buf[24];
    char* p = buf + sizeof buf;
    *--p = '\0';
    do {
        const unsigned d = static_cast<unsigned>(v % base);
        *--p = static_cast<char>(d < 10 ? '0' + d : 'a' + d - 10);
        v /= base;
    } while (v != 0);
    if (base == 16) put("0x");
    put(p);
}

void on_fatal(int sig, siginfo_t* info, void*) {
    put(g_prog);
    put(": fatal signal ");
    if (const char* name = sigabbrev_np(sig)) {
        put("SIG");
        put(name);
    } else {
        put_number(static_cast<uint64_t>(sig), 10);
    }
    if (sig != SIGABRT) {
        put(" at address ");
        put_number(reinterpret_cast<uintptr_t>(info->si_addr), 16);
    }
    put(" in thread ");
    put_number(static_cast<uint64_t>(::syscall(SYS_gettid)), 10);
    put("; backtrace:\n");
    void* frames[64];
    const int n = ::backtrace(frames, 64);
    ::backtrace_symbols_fd(frames, n, STDERR_FILENO);
    // SA_RESETHAND put the default action back: die of the same signal.
    ::raise(sig);
}

}  // namespace

void install_crash_report(const char* prog) {
    g_prog = prog;
    // backtrace() loads libgcc on its first call, which allocates: do that
    // now, not in the handler.
    void* warm[1];
    (void)::backtrace(warm, 1);
    stack_t ss{};
    ss.ss_sp = g_alt_stack;
    ss.ss_size = sizeof g_alt_stack;
    ::sigaltstack(&ss, nullptr);
    struct sigaction sa {};
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (int sig : kSignals) ::sigaction(sig, &sa, nullptr);
}

}  // namespace rocemu::cli

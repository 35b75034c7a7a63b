#include "fabric/bench/page_census.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>
#include <vector>

#include "common/sanitizer.hpp"

namespace rocemu::bench {
#ifndef ROCEMU_SANITIZED_HEAP
namespace {

constexpr uintptr_t kPage = 4096;
constexpr std::size_t kMaxRanges = 64;

struct Range {
    uintptr_t lo, hi;
    std::string name;
};

struct Record {
    uintptr_t page;
    uintptr_t ip;
};

// What the handler reads and writes, in static storage and a buffer mapped
// after the mappings were listed: it must not touch the memory it watches.
uintptr_t g_lo[kMaxRanges], g_hi[kMaxRanges];
std::size_t g_nranges = 0;
Record* g_rec = nullptr;
std::size_t g_n = 0;
uint64_t g_dropped = 0;
struct sigaction g_old {};

void on_fault(int sig, siginfo_t* si, void* uctx) {
    const auto a = reinterpret_cast<uintptr_t>(si->si_addr);
    bool watched = false;
    for (std::size_t i = 0; i < g_nranges; ++i) watched |= a >= g_lo[i] && a < g_hi[i];
    if (!watched) {
        // A real fault: the previous handler (or the default action) takes
        // it when the instruction runs again.
        sigaction(sig, &g_old, nullptr);
        return;
    }
    const uintptr_t page = a & ~(kPage - 1);
    if (g_n < kMaxCensusPages)
        g_rec[g_n++] = Record{page, static_cast<uintptr_t>(static_cast<const ucontext_t*>(uctx)->uc_mcontext.gregs[REG_RIP])};
    else
        ++g_dropped;
    mprotect(reinterpret_cast<void*>(page), kPage, PROT_READ | PROT_WRITE);
}

struct Module {
    uintptr_t lo, hi, offset;
    std::string path;
};

// The watched mappings (big private writable ones and glibc's heap; not
// the stack nor small ones such as the libraries' data) and the code.
void read_maps(std::vector<Range>& watched, std::vector<Module>& code) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        unsigned long lo = 0, hi = 0, off = 0;
        char perms[8] = {};
        char path[512] = {};
        if (std::sscanf(line.c_str(), "%lx-%lx %7s %lx %*s %*u %511[^\n]", &lo, &hi, perms, &off, path) < 4) continue;
        std::string p = path;
        p.erase(0, p.find_first_not_of(' '));
        if (perms[2] == 'x' && !p.empty() && p[0] == '/') code.push_back(Module{lo, hi, off, p});
        const bool big = hi - lo >= (uintptr_t{16} << 20);
        if (std::strcmp(perms, "rw-p") == 0 && (p == "[heap]" || (p.empty() && big)) && watched.size() < kMaxRanges)
            watched.push_back(Range{lo, hi, p.empty() ? "anon" : p});
    }
}

std::string where(uintptr_t ip, const std::vector<Module>& code) {
    char b[640];
    for (const Module& m : code)
        if (ip >= m.lo && ip < m.hi) {
            std::snprintf(b, sizeof b, "%s+0x%lx", m.path.c_str(), static_cast<unsigned long>(ip - m.lo + m.offset));
            return b;
        }
    std::snprintf(b, sizeof b, "0x%lx", static_cast<unsigned long>(ip));
    return b;
}

template <class Key>
std::string ranked(const std::map<Key, uint64_t>& counts, uint64_t windows, const auto& name) {
    std::vector<std::pair<uint64_t, Key>> v;
    for (const auto& [k, n] : counts) v.emplace_back(n, k);
    std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::string out;
    char b[32];
    for (const auto& [n, k] : v) {
        std::snprintf(b, sizeof b, "%.1f ", static_cast<double>(n) / static_cast<double>(windows));
        out += b + name(k) + "\n";
    }
    return out;
}

}  // namespace
#endif

CensusResult page_census(uint64_t windows, const std::function<void(uint64_t)>& run_window) {
#ifdef ROCEMU_SANITIZED_HEAP
    (void)windows;
    (void)run_window;
    throw std::runtime_error("page census: not in a sanitizer build (its shadow memory would be watched too)");
#else
    std::vector<Range> ranges;
    std::vector<Module> code;
    read_maps(ranges, code);
    const std::size_t rec_bytes = kMaxCensusPages * sizeof(Record);
    void* mem = mmap(nullptr, rec_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) throw std::runtime_error("page census: cannot map its record buffer");
    g_rec = static_cast<Record*>(mem);
    g_nranges = 0;
    for (const Range& r : ranges) {
        g_lo[g_nranges] = r.lo;
        g_hi[g_nranges++] = r.hi;
    }
    g_dropped = 0;
    struct sigaction sa {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_old);
    const auto unwatch = [&] {
        for (const Range& r : ranges) mprotect(reinterpret_cast<void*>(r.lo), r.hi - r.lo, PROT_READ | PROT_WRITE);
    };
    // Everything back as it was (the memory writable, the old handler).
    const auto finish = [&] {
        unwatch();
        sigaction(SIGSEGV, &g_old, nullptr);
        g_nranges = 0;
        munmap(mem, rec_bytes);
    };

    std::map<uintptr_t, uint64_t> by_ip;
    std::map<std::size_t, uint64_t> by_range;
    CensusResult out;
    out.windows = windows;
    for (uint64_t w = 0; w < windows; ++w) {
        g_n = 0;
        for (const Range& r : ranges)
            if (mprotect(reinterpret_cast<void*>(r.lo), r.hi - r.lo, PROT_NONE) != 0) {
                finish();
                throw std::runtime_error("page census: mprotect refused to watch " + r.name);
            }
        try {
            run_window(w);
        } catch (...) {
            finish();
            throw;
        }
        unwatch();
        out.pages += g_n;
        std::vector<uintptr_t> huge(g_n);
        for (std::size_t i = 0; i < g_n; ++i) huge[i] = g_rec[i].page >> 21;
        std::sort(huge.begin(), huge.end());
        out.huge_pages += static_cast<uint64_t>(std::unique(huge.begin(), huge.end()) - huge.begin());
        for (std::size_t i = 0; i < g_n; ++i) {
            ++by_ip[g_rec[i].ip];
            for (std::size_t k = 0; k < ranges.size(); ++k)
                if (g_rec[i].page >= ranges[k].lo && g_rec[i].page < ranges[k].hi) ++by_range[k];
        }
    }
    out.dropped = g_dropped;
    finish();
    const uint64_t n = std::max<uint64_t>(windows, 1);
    out.by_code = ranked(by_ip, n, [&](uintptr_t ip) { return where(ip, code); });
    out.by_mapping = ranked(by_range, n, [&](std::size_t k) {
        char b[64];
        std::snprintf(b, sizeof b, " %lx-%lx", static_cast<unsigned long>(ranges[k].lo),
                      static_cast<unsigned long>(ranges[k].hi));
        return ranges[k].name + b;
    });
    return out;
#endif
}

}  // namespace rocemu::bench

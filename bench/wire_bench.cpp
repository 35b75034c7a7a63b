// Wire-layer throughput in one run: ICRC GB/s at 64 B, 1 KiB and 4 KiB;
// parse+verify and encode in Mpps; and single-core cold memcpy for
// comparison. Prints the ICRC(4 KiB) / memcpy ratio (target >= 1).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

#include <cstring>
#include "dataplane/wire/icrc.hpp"
#include "dataplane/wire/packet.hpp"

using namespace rocemu;
using namespace rocemu::wire;

namespace {

// A pool of frames larger than the LLC, so the CRC reads cold data like the
// memcpy baseline does.
struct FramePool {
    explicit FramePool(uint32_t payload) {
        RocePacket p;
        p.l3.src = IpAddr::from_v4(0x0A000001);
        p.l3.dst = IpAddr::from_v4(0x0A000002);
        p.bth.opcode = op::WRITE_MIDDLE;
        std::vector<uint8_t> pay(payload, 0x3C);
        p.payload = pay.data();
        p.payload_len = payload;
        len = roce_frame_len(p);
        stride = (len + 63) & ~size_t{63};
        count = std::max<size_t>(64, (size_t{256} << 20) / stride);
        bytes.resize(count * stride);
        for (size_t i = 0; i < count; ++i) {
            p.bth.psn = Psn{static_cast<uint32_t>(i)};
            encode_roce(p, std::span(bytes.data() + i * stride, stride));
        }
    }
    const uint8_t* frame(size_t i) const { return bytes.data() + (i % count) * stride; }
    size_t len, stride, count;
    std::vector<uint8_t> bytes;
};

void BM_Icrc(benchmark::State& st) {
    static std::map<int64_t, FramePool*> pools;
    auto*& pool = pools[st.range(0)];
    if (pool == nullptr) pool = new FramePool(static_cast<uint32_t>(st.range(0)));
    const size_t covered = pool->len - 14 - 4;
    size_t i = 0;
    for (auto _ : st) benchmark::DoNotOptimize(compute_icrc(pool->frame(i++) + 14, covered, false));
    st.SetBytesProcessed(static_cast<int64_t>(st.iterations() * covered));
    st.counters["GB/s"] = benchmark::Counter(static_cast<double>(st.iterations() * covered) / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Icrc)->Arg(64)->Arg(1024)->Arg(4096);

// The baseline: copying 4 KiB payloads between cold buffers, the one copy a
// NIC makes per packet, timed exactly like the ICRC above.
void BM_ColdMemcpy(benchmark::State& st) {
    const size_t chunk = static_cast<size_t>(st.range(0));
    static std::vector<uint8_t> src(size_t{256} << 20, 1), dst(size_t{256} << 20, 0);
    const size_t slots = src.size() / chunk;
    size_t i = 0;
    for (auto _ : st) {
        const size_t off = (i++ % slots) * chunk;
        std::memcpy(dst.data() + off, src.data() + off, chunk);
        benchmark::ClobberMemory();
    }
    st.counters["GB/s"] = benchmark::Counter(static_cast<double>(st.iterations() * chunk) / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ColdMemcpy)->Arg(4096);

void BM_ParseVerify(benchmark::State& st) {
    static FramePool pool(1024);
    size_t i = 0;
    RocePacket p;
    for (auto _ : st) {
        benchmark::DoNotOptimize(parse_roce(std::span(pool.frame(i++), pool.len), p));
    }
    st.counters["Mpps"] = benchmark::Counter(static_cast<double>(st.iterations()) / 1e6, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ParseVerify);

void BM_EncodeWithIcrc(benchmark::State& st) {
    std::vector<uint8_t> payload(static_cast<size_t>(st.range(0)), 0x42);
    std::vector<uint8_t> out(9216);
    RocePacket p;
    p.l3.src = IpAddr::from_v4(0x0A000001);
    p.l3.dst = IpAddr::from_v4(0x0A000002);
    p.bth.opcode = op::SEND_ONLY;
    p.payload = payload.data();
    p.payload_len = static_cast<uint32_t>(payload.size());
    uint32_t psn = 0;
    for (auto _ : st) {
        p.bth.psn = Psn{psn++};
        benchmark::DoNotOptimize(encode_roce(p, out));
    }
    st.counters["Mpps"] = benchmark::Counter(static_cast<double>(st.iterations()) / 1e6, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EncodeWithIcrc)->Arg(64)->Arg(1024);

// Keeps the console output and remembers each benchmark's counters.
class Collector : public benchmark::ConsoleReporter {
public:
    void ReportRuns(const std::vector<Run>& runs) override {
        ConsoleReporter::ReportRuns(runs);
        for (const Run& r : runs)
            for (const auto& [name, c] : r.counters) values[r.benchmark_name() + ":" + name] = c.value;
    }
    std::map<std::string, double> values;
};

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    Collector rep;
    benchmark::RunSpecifiedBenchmarks(&rep);
    const double memcpy_gbs = rep.values["BM_ColdMemcpy/4096:GB/s"];
    const double icrc4k = rep.values["BM_Icrc/4096:GB/s"];
    fmt::print("\n=== rocemu wire summary (one run, one core) ===\n");
    fmt::print("ICRC   64 B : {:7.2f} GB/s\n", rep.values["BM_Icrc/64:GB/s"]);
    fmt::print("ICRC 1 KiB  : {:7.2f} GB/s\n", rep.values["BM_Icrc/1024:GB/s"]);
    fmt::print("ICRC 4 KiB  : {:7.2f} GB/s\n", icrc4k);
    fmt::print("parse+verify (1 KiB frames): {:6.2f} Mpps\n", rep.values["BM_ParseVerify:Mpps"]);
    fmt::print("encode+ICRC 64 B : {:6.2f} Mpps, 1 KiB : {:6.2f} Mpps\n", rep.values["BM_EncodeWithIcrc/64:Mpps"],
               rep.values["BM_EncodeWithIcrc/1024:Mpps"]);
    fmt::print("cold memcpy 4 KiB (256 MiB buffers): {:7.2f} GB/s\n", memcpy_gbs);
    fmt::print("ratio ICRC(4 KiB) / cold memcpy = {:.2f}  (target >= 1.00)\n", icrc4k / memcpy_gbs);
    return 0;
}

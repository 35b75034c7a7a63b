// Property tests on the virtual-time runtime: two engines as sim nodes joined
// by a pair of sim links whose link::Model loses, duplicates, corrupts (bad
// ICRC) and reorders (K paths keyed by UDP source port, jitter, late frames)
// frames, 1000 seeds per mix, in both reliability modes, random workloads
// (every operation, 0 B to 1 MiB, one to three QPs, RNR on some seeds).
// Every posted WR must complete exactly once with SUCCESS, every RECV once
// with the right length and immediate, received data must equal sent data
// byte for byte, READ and atomic results must be right, each run must finish
// within kBound of virtual time, and no node may spin on a passed deadline.
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include "tests/unit/transport/sim_harness.hpp"

namespace rocemu::transport::test {
namespace {

constexpr Nanos kBound = Nanos::from_s(5);
// The release run covers 1000 seeds per mix; the sanitizer run, which is
// there for memory errors and runs about ten times slower, a quarter of them.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kSeeds = 250;
#else
constexpr int kSeeds = 1000;
#endif

struct Mix {
    const char* name;
    double loss = 0, dup = 0, corrupt = 0, reorder = 0;
};

// 100G, 2 us. Reordering: four paths of 1..4 us (a spraying QP's packets take
// them all, an interop QP sticks to one), 1 us of jitter that may overtake,
// and `reorder` of the frames 2.5 us late.
sim::LinkConfig link_of(const Mix& mix) {
    sim::LinkConfig c;
    c.speed = BitsPerSec::gbps(100);
    c.propagation_delay = Nanos{2000};
    c.loss_rate = mix.loss;
    c.duplicate_rate = mix.dup;
    c.corrupt_rate = mix.corrupt;
    c.corrupt_as = sim::Corruption::BadIcrc;
    if (mix.reorder > 0) {
        for (int64_t d : {1000, 2000, 3000, 4000}) c.paths.push_back(Nanos{d});
        c.jitter = Nanos{1000};
        c.jitter_reorders = true;
        c.reorder_rate = mix.reorder;
        c.reorder_delay = Nanos{2500};
    }
    return c;
}

const Mix kMixes[] = {
    {"loss", 0.03, 0, 0, 0},
    {"reorder", 0, 0, 0, 0.3},
    {"dup", 0, 0.05, 0, 0},
    {"corrupt", 0, 0, 0.03, 0},
    {"all", 0.02, 0.02, 0.01, 0.2},
};

struct Expect {
    WrOpcode op;
    uint64_t wr_id;
    uint32_t len;
    size_t src_off;   // side 0 offset of the local buffer
    size_t dst_off;   // side 1 offset of the remote buffer / RECV buffer
    uint64_t atomic_init = 0, atomic_final = 0;
    bool completed = false;
};

struct PerQp {
    Side s[2];
    std::vector<Expect> wrs;
    std::vector<const Expect*> recvs;  // in the order RECVs are consumed
    size_t recv_done = 0;
};

uint32_t pick_len(Rng& r, int seed, int i) {
    if (i == 0 && seed % 100 == 7) return 1u << 20;  // 1 MiB in 1% of the runs
    switch (r.below(10)) {
        case 0: return 0;
        case 1: return static_cast<uint32_t>(1 + r.below(64 * 1024));
        default: return static_cast<uint32_t>(1 + r.below(5000));
    }
}

// What the faults did in a run, summed over both directions: evidence that
// the harness exercised what the mix names.
struct Exercised {
    uint64_t lost = 0, duplicated = 0, corrupted = 0;  // by the links
    uint64_t bad_icrc = 0, out_of_seq = 0, duplicates = 0, retries = 0;  // seen by the engines
    void add(const Exercised& o) {
        lost += o.lost, duplicated += o.duplicated, corrupted += o.corrupted;
        bad_icrc += o.bad_icrc, out_of_seq += o.out_of_seq, duplicates += o.duplicates, retries += o.retries;
    }
};

struct Outcome {
    bool ok = true;
    std::string why;
    Exercised ex;
    void fail(std::string s) {
        if (ok) why = std::move(s);
        ok = false;
    }
};

Outcome run_seed(Reliability mode, const Mix& mix, int seed) {
    Outcome out;
    Rng rng(static_cast<uint64_t>(seed) * 7919 + static_cast<uint64_t>(mode) * 13 + mix.loss * 1000);
    EngineConfig base;
    base.rng_seed = static_cast<uint64_t>(seed) + 1;
    SimLoop L(base, link_of(mix), rng.next());
    const PathMtu mtu = static_cast<PathMtu>(1 + rng.below(5));
    const int nqp = 1 + static_cast<int>(rng.below(3));
    const size_t kMem = (seed % 100 == 7 ? 3u << 20 : 1u << 20);
    std::vector<uint8_t> mem[2];
    for (int i = 0; i < 2; ++i) mem[i].assign(kMem, 0);
    std::vector<PerQp> qps(nqp);
    MrHandle mr[2];
    QpInitAttr tmpl;
    tmpl.reliability = mode;
    tmpl.spray_policy = static_cast<SprayPolicy>(rng.below(3));
    tmpl.spray_paths = 4;
    tmpl.reorder_window = 128;
    tmpl.cap.max_send_wr = 64;
    tmpl.cap.max_recv_wr = 64;
    // All QPs of a side share one PD, so one MR covers them.
    PdHandle pd[2];
    for (int i = 0; i < 2; ++i) {
        pd[i] = L[i].alloc_pd().value;
        mr[i] = L[i].reg_mr(pd[i], mem[i].data(), kMem, kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic).value;
    }
    for (auto& q : qps) {
        for (int i = 0; i < 2; ++i) {
            q.s[i].pd = pd[i];
            q.s[i].scq = L[i].create_cq(256).value;
            q.s[i].rcq = L[i].create_cq(256).value;
            QpInitAttr ia = tmpl;
            ia.pd = pd[i];
            ia.send_cq = q.s[i].scq;
            ia.recv_cq = q.s[i].rcq;
            q.s[i].qpn = L[i].create_qp(ia).value;
        }
        ConnectOpts o;
        o.mtu = mtu;
        o.timeout = 8;  // 1 ms
        o.psn[0] = Psn{static_cast<uint32_t>(rng.below(2) ? 0xFFFFFF - rng.below(300) : rng.below(1 << 24))};
        o.psn[1] = Psn{static_cast<uint32_t>(rng.below(1 << 24))};
        connect(L, q.s, o);
    }

    // Lay out the workload: side 0 buffers from the front, side 1 regions
    // likewise; nothing overlaps, so every byte can be checked.
    size_t off0 = 0, off1 = 0;
    auto take = [&](size_t& off, uint32_t len) {
        const size_t at = off;
        off += (len + 15) & ~size_t{7};
        return at;
    };
    const int per_qp = 3 + static_cast<int>(rng.below(6));
    uint64_t id = 1;
    for (auto& q : qps) {
        for (int i = 0; i < per_qp; ++i) {
            Expect e;
            e.op = static_cast<WrOpcode>(rng.below(7));
            e.wr_id = id++;
            e.len = (e.op == WrOpcode::AtomicCmpAndSwp || e.op == WrOpcode::AtomicFetchAndAdd)
                        ? 8
                        : pick_len(rng, seed, static_cast<int>(&q - qps.data()) + i);
            if (off0 + e.len + 16 > kMem || off1 + e.len + 16 > kMem) e.len = 64;
            e.src_off = take(off0, e.len);
            e.dst_off = take(off1, e.len);
            q.wrs.push_back(e);
        }
    }
    for (size_t k = 0; k < off0; k += 8) {
        const uint64_t v = rng.next();
        std::memcpy(&mem[0][k], &v, std::min<size_t>(8, kMem - k));
    }
    // Atomic targets start from known values.
    for (auto& q : qps)
        for (auto& e : q.wrs)
            if (e.op == WrOpcode::AtomicCmpAndSwp || e.op == WrOpcode::AtomicFetchAndAdd) {
                e.atomic_init = rng.next();
                std::memcpy(&mem[1][e.dst_off], &e.atomic_init, 8);
            }

    const bool late_recv = seed % 5 == 0;  // RNR path
    auto post_recvs = [&] {
        for (auto& q : qps) {
            q.recvs.clear();
            for (auto& e : q.wrs) {
                const bool consumes = e.op == WrOpcode::Send || e.op == WrOpcode::SendWithImm ||
                                      e.op == WrOpcode::RdmaWriteWithImm;
                if (!consumes) continue;
                const bool into_buf = e.op != WrOpcode::RdmaWriteWithImm;
                RecvWr r = make_recv(e.wr_id, &mem[1][e.dst_off], into_buf ? e.len : 0, mr[1].lkey);
                if (!into_buf) r.sg_list.clear();
                if (L[1].post_recv(q.s[1].qpn, std::array{r}, L.fx[1])) out.fail("post_recv failed");
                q.recvs.push_back(&e);
            }
        }
    };
    if (!late_recv) post_recvs();

    for (auto& q : qps) {
        for (auto& e : q.wrs) {
            SendWr w = make_wr(e.wr_id, e.op, &mem[0][e.src_off], e.len, mr[0].lkey);
            w.remote_addr = reinterpret_cast<uint64_t>(&mem[1][e.dst_off]);
            w.rkey = mr[1].rkey;
            w.imm_data = static_cast<uint32_t>(e.wr_id * 2654435761u);
            if (e.op == WrOpcode::AtomicFetchAndAdd) {
                w.compare_add = e.wr_id;
                e.atomic_final = e.atomic_init + e.wr_id;
            } else if (e.op == WrOpcode::AtomicCmpAndSwp) {
                const bool hit = rng.below(2);
                w.compare_add = hit ? e.atomic_init : e.atomic_init + 1;
                w.swap = e.wr_id * 3;
                e.atomic_final = hit ? w.swap : e.atomic_init;
            }
            if (e.op == WrOpcode::Send && e.len <= 64 && rng.below(2)) w.send_flags |= kSendInline;
            if (L[0].post_send(q.s[0].qpn, std::array{w}, L.fx[0])) out.fail("post_send failed");
        }
    }

    size_t total = 0, done = 0;
    for (auto& q : qps) total += q.wrs.size();
    bool recvs_posted = !late_recv;
    auto check_cqs = [&] {
        Wc wc[64];
        for (auto& q : qps) {
            for (uint32_t n; (n = L[0].poll_cq(q.s[0].scq, wc)) > 0;) {
                for (uint32_t k = 0; k < n; ++k) {
                    Expect* e = nullptr;
                    for (auto& x : q.wrs)
                        if (x.wr_id == wc[k].wr_id) e = &x;
                    if (!e) out.fail("completion for an unknown wr_id");
                    else if (e->completed) out.fail(fmt::format("wr {} completed twice", e->wr_id));
                    else if (wc[k].status != WcStatus::Success)
                        out.fail(fmt::format("wr {} op {} len {} status {}", e->wr_id, static_cast<int>(e->op), e->len,
                                             to_string(wc[k].status)));
                    if (e) e->completed = true;
                    ++done;
                }
            }
            for (uint32_t n; (n = L[1].poll_cq(q.s[1].rcq, wc)) > 0;) {
                for (uint32_t k = 0; k < n; ++k) {
                    if (q.recv_done >= q.recvs.size()) {
                        out.fail("extra receive completion");
                        continue;
                    }
                    const Expect& e = *q.recvs[q.recv_done++];
                    if (wc[k].wr_id != e.wr_id || wc[k].status != WcStatus::Success || wc[k].byte_len != e.len)
                        out.fail(fmt::format("recv {} got wr {} status {} len {} want {}", e.wr_id, wc[k].wr_id,
                                             to_string(wc[k].status), wc[k].byte_len, e.len));
                    const bool imm = e.op != WrOpcode::Send;
                    if (imm != bool(wc[k].wc_flags & kWcWithImm) ||
                        (imm && wc[k].imm_data != static_cast<uint32_t>(e.wr_id * 2654435761u)))
                        out.fail(fmt::format("recv {} immediate wrong", e.wr_id));
                }
            }
        }
    };
    const bool finished = L.run(
        [&] {
            if (!recvs_posted && L.now() >= Nanos::from_us(50)) {
                post_recvs();
                recvs_posted = true;
            }
            check_cqs();
            size_t rdone = 0, rtotal = 0;
            for (auto& q : qps) rdone += q.recv_done, rtotal += q.recvs.size();
            return !out.ok || (recvs_posted && done == total && rdone == rtotal);
        },
        kBound);
    if (!finished && !recvs_posted) {
        post_recvs();
        recvs_posted = true;
        L.run([&] { check_cqs(); return done == total; }, kBound);
    }
    if (!out.ok) return out;
    if (done != total) out.fail(fmt::format("stalled: {} of {} WRs done at {} us", done, total, L.now().us()));
    if (L.now() > kBound) out.fail("over the virtual-time bound");
    L.settle(L.now() + Nanos::from_ms(50));
    check_cqs();
    if (L.spins() != 0) out.fail(fmt::format("{} timer expiries left a passed deadline", L.spins()));
    for (int i = 0; i < 2; ++i) {
        const sim::LinkCounters& lc = L.link(i).counters();
        const Counters& c = L[i].counters();
        auto drops = [&](DropReason r) { return c.drops[static_cast<size_t>(r)]; };
        out.ex.lost += lc.dropped(sim::LinkDrop::Loss);
        out.ex.duplicated += lc.duplicated;
        out.ex.corrupted += lc.corrupted;
        out.ex.bad_icrc += drops(DropReason::BadIcrc);
        out.ex.out_of_seq += c.out_of_seq_request;
        out.ex.duplicates += c.duplicate_request + drops(DropReason::DuplicateInWindow);
        out.ex.retries += c.completer_retry_err + c.selective_retransmits;
    }
    if (std::getenv("TRANSPORT_VERBOSE")) {
        for (int i = 0; i < 2; ++i) {
            std::string c;
            for_each_counter(L[i].counters(), [&](const char* name, uint64_t v) {
                if (v) c += fmt::format(" {}={}", name, v);
            });
            const sim::LinkCounters& lc = L.link(i).counters();
            fmt::print(stderr, "side {} at {} us:{}\n  link: {} frames, {} lost, {} duplicated, {} corrupted\n", i,
                       L.now().us(), c, lc.tx_frames, lc.dropped(sim::LinkDrop::Loss), lc.duplicated, lc.corrupted);
        }
    }
    // Every SEND and WRITE byte is counted once by the receiver, however
    // often it crossed the link (duplicates, go-back-N, spraying's early
    // placement), and nothing else is.
    uint64_t sent_payload = 0;
    for (const auto& q : qps)
        for (const auto& e : q.wrs)
            if (e.op == WrOpcode::Send || e.op == WrOpcode::SendWithImm || e.op == WrOpcode::RdmaWrite ||
                e.op == WrOpcode::RdmaWriteWithImm)
                sent_payload += e.len;
    if (L[1].counters().rcvd_bytes != sent_payload || L[0].counters().rcvd_bytes != 0)
        out.fail(fmt::format("rcvd_bytes {} and {}, want {} and 0", L[1].counters().rcvd_bytes,
                             L[0].counters().rcvd_bytes, sent_payload));
    for (auto& q : qps)
        for (auto& e : q.wrs) {
            const uint8_t* src = &mem[0][e.src_off];
            const uint8_t* dst = &mem[1][e.dst_off];
            switch (e.op) {
                case WrOpcode::Send:
                case WrOpcode::SendWithImm:
                case WrOpcode::RdmaWrite:
                case WrOpcode::RdmaWriteWithImm:
                    if (e.len && std::memcmp(src, dst, e.len) != 0) out.fail(fmt::format("data of wr {} differs", e.wr_id));
                    break;
                case WrOpcode::RdmaRead:
                    if (e.len && std::memcmp(src, dst, e.len) != 0) out.fail(fmt::format("READ {} data differs", e.wr_id));
                    break;
                case WrOpcode::AtomicCmpAndSwp:
                case WrOpcode::AtomicFetchAndAdd: {
                    uint64_t got, fin;
                    std::memcpy(&got, src, 8);
                    std::memcpy(&fin, dst, 8);
                    if (got != e.atomic_init || fin != e.atomic_final)
                        out.fail(fmt::format("atomic {} result {} final {} want {} {}", e.wr_id, got, fin, e.atomic_init,
                                             e.atomic_final));
                    break;
                }
            }
        }
    return out;
}

struct TransportProperty : ::testing::TestWithParam<std::tuple<Reliability, int>> {};

TEST_P(TransportProperty, EveryWrCompletesOnceWithRightData) {
    const auto [mode, mix_idx] = GetParam();
    const Mix& mix = kMixes[mix_idx];
    int failures = 0;
    // TRANSPORT_SEED=n replays one seed.
    const char* only = std::getenv("TRANSPORT_SEED");
    Exercised ex;
    for (int seed = only ? std::atoi(only) : 0; seed < (only ? std::atoi(only) + 1 : kSeeds); ++seed) {
        if (std::getenv("TRANSPORT_VERBOSE")) fmt::print(stderr, "seed {}\n", seed);
        Outcome o = run_seed(mode, mix, seed);
        ex.add(o.ex);
        if (!o.ok) {
            ADD_FAILURE() << "mix " << mix.name << " seed " << seed << ": " << o.why;
            if (++failures >= 5) return;
        }
    }
    if (only) return;
    // The faults happened, and the engines saw each of them.
    if (mix.loss > 0) {
        EXPECT_GT(ex.lost, 0u);
        EXPECT_GT(ex.retries, 0u);
    }
    if (mix.dup > 0) {
        EXPECT_GT(ex.duplicated, 0u);
        EXPECT_GT(ex.duplicates, 0u);
    }
    if (mix.corrupt > 0) {
        EXPECT_GT(ex.corrupted, 0u);
    }
    // Every corrupted frame that arrived was dropped for its ICRC, and only
    // those (a duplicated corrupted frame arrives twice).
    if (mix.dup == 0) {
        EXPECT_EQ(ex.bad_icrc, ex.corrupted);
    } else {
        EXPECT_GE(ex.bad_icrc, ex.corrupted);
    }
    if (mix.reorder > 0) {
        EXPECT_GT(ex.out_of_seq, 0u);
    }
    fmt::print("mix {}: {} lost, {} duplicated, {} corrupted; engines: {} bad ICRC, {} out of sequence, {} duplicates, "
               "{} retries\n",
               mix.name, ex.lost, ex.duplicated, ex.corrupted, ex.bad_icrc, ex.out_of_seq, ex.duplicates, ex.retries);
}

INSTANTIATE_TEST_SUITE_P(Modes, TransportProperty,
                         ::testing::Combine(::testing::Values(Reliability::Interop, Reliability::Spray),
                                            ::testing::Range(0, 5)),
                         [](const auto& info) {
                             return fmt::format("{}_{}",
                                                std::get<0>(info.param) == Reliability::Interop ? "interop" : "spray",
                                                kMixes[std::get<1>(info.param)].name);
                         });

}  // namespace
}  // namespace rocemu::transport::test

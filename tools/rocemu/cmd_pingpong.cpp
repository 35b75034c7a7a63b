// `rocemu pingpong`: ibv_rc_pingpong and ibv_ud_pingpong (rdma-core
// libibverbs/examples) on an emulated NIC. Same TCP exchange, same QP setup,
// same traffic and the same closing lines, so either side can be the real tool.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <optional>
#include <vector>

#include "dataplane/dpdk/host/gid.hpp"
#include "tools/rocemu/commands.hpp"
#include "tools/rocemu/nic_cli.hpp"
#include "tools/rocemu/oob.hpp"
#include "tools/rocemu/qp_setup.hpp"
#include "verbs/verbs.hpp"

namespace rocemu::cli {
namespace {

using namespace rocemu::verbs;

constexpr uint64_t kRecvWrid = 1;
constexpr uint64_t kSendWrid = 2;
constexpr uint32_t kRxDepth = 500;  // rc_pingpong's default -r
constexpr uint32_t kUdQkey = 0x11111111;
constexpr uint32_t kGrhBytes = 40;
const Nanos kExchangeTimeout = Nanos::from_s(60);
const Nanos kStallTimeout = Nanos::from_s(5);

struct PingpongOptions : NicCliOptions {
    int size = -1;  // -1: 4096 (RC) or 2048 (UD), as the real tools
    int iters = 1000;
    int tcp_port = oob::kDefaultPort;
    bool ud = false;
};

std::string gid_text(const Gid& g) {
    char s[INET6_ADDRSTRLEN];
    return inet_ntop(AF_INET6, g.data(), s, sizeof s) ? s : "?";
}

void print_dest(const char* which, const oob::PingpongDest& d) {
    Gid g;
    std::copy(d.gid.begin(), d.gid.end(), g.begin());
    fmt::print("  {} LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}\n", which, d.lid, d.qpn, d.psn,
               gid_text(g));
}

class Pingpong {
public:
    Pingpong(const PingpongOptions& o, Context& ctx) : o_(o), ctx_(ctx) {}

    // The run, then the teardown; 1 if either failed.
    int run() {
        const int status = exchange();
        const int closed = close();
        return status ? status : closed;
    }

private:
    int exchange() {
        if (!setup()) return 1;
        oob::PingpongDest local;
        local.qpn = qpn_.v;
        local.psn = static_cast<uint32_t>(lrand48() & 0xffffff);
        Gid g;
        ctx_.query_gid(1, gidx_, g);
        std::copy(g.begin(), g.end(), local.gid.begin());
        print_dest("local address: ", local);
        std::fflush(stdout);

        oob::Result r;
        if (o_.server.empty()) {
            r = oob::serve(static_cast<uint16_t>(o_.tcp_port), local, kExchangeTimeout,
                           [&](const oob::PingpongDest& remote) { return connect(local, remote); });
            if (!r.remote) return fail("Couldn't get remote address: " + r.error);
        } else {
            r = oob::connect(o_.server, static_cast<uint16_t>(o_.tcp_port), local, kExchangeTimeout);
            if (!r.remote) return fail("Couldn't get remote address: " + r.error);
            if (std::string e = connect(local, *r.remote); !e.empty()) return fail(e);
        }
        print_dest("remote address:", *r.remote);
        std::fflush(stdout);
        return pingpong();
    }

    // ibv_rc_pingpong's teardown order: the QP first (nothing more lands in
    // the buffer), the AH, the MR (dereg_mr waits for zero-copy frames that
    // still read the buffer), the CQ, its channel, the PD. Whatever setup()
    // did not get to is skipped. A buffer whose MR stays registered is kept,
    // never freed under the NIC. Returns 0, or 1 after saying what failed.
    int close() {
        int status = 0;
        const auto check = [&](int err, const char* what) {
            if (err) status = fail(fmt::format("{}: {}", what, ctx_.last_error()));
        };
        if (qpn_.v) check(ctx_.destroy_qp(qpn_), "Couldn't destroy QP");
        if (ah_.id) check(ctx_.destroy_ah(ah_), "Couldn't destroy AH");
        if (mr_.lkey) {
            const int err = ctx_.dereg_mr(mr_);
            check(err, "Couldn't deregister MR");
            if (err) verbs::keep_pinned(std::move(buf_));
        }
        if (cq_.id) check(ctx_.destroy_cq(cq_), "Couldn't destroy CQ");
        channel_.reset();
        if (pd_.id) check(ctx_.dealloc_pd(pd_), "Couldn't deallocate PD");
        return status;
    }
    int fail(const std::string& msg) {
        fmt::print(stderr, "rocemu pingpong: {}\n", msg);
        return 1;
    }

    bool setup() {
        if (std::string e = resolve_gid_and_mtu(ctx_, o_, gidx_, mtu_); !e.empty()) return !fail(e);
        // UD messages are bounded by the port's active MTU, whatever -m says, as in ibv_ud_pingpong.
        PortAttr pa;
        ctx_.query_port(1, pa);
        if (o_.ud && size_ > transport::mtu_bytes(pa.active_mtu))
            return !fail(fmt::format("Requested size larger than port MTU ({})", transport::mtu_bytes(pa.active_mtu)));

        const size_t buf_len = size_ + (o_.ud ? kGrhBytes : 0);
        buf_.assign(buf_len, 0x7b);
        if (ctx_.alloc_pd(pd_) || ctx_.reg_mr(pd_, buf_.data(), buf_.size(), transport::kLocalWrite, mr_) ||
            ctx_.create_comp_channel(channel_) || ctx_.create_cq(kRxDepth + 1, channel_.get(), cq_))
            return !fail(ctx_.last_error());
        QpInitAttr ia;
        ia.qp_type = o_.ud ? QpType::Ud : QpType::Rc;
        ia.pd = pd_;
        ia.send_cq = cq_;
        ia.recv_cq = cq_;
        ia.cap.max_send_wr = 1;
        ia.cap.max_recv_wr = kRxDepth;
        ia.cap.max_send_sge = 1;
        ia.cap.max_recv_sge = 1;
        if (ctx_.create_qp(ia, qpn_)) return !fail("Couldn't create QP: " + ctx_.last_error());
        if (modify_qp_to_init(ctx_, qpn_, 0, o_.ud ? std::optional<uint32_t>(kUdQkey) : std::nullopt))
            return !fail("Failed to modify QP to INIT: " + ctx_.last_error());
        if (post_recvs(kRxDepth) != kRxDepth) return !fail("Couldn't post receive: " + ctx_.last_error());
        routs_ = kRxDepth;
        return true;
    }

    uint32_t post_recvs(uint32_t n) {
        RecvWr w;
        w.wr_id = kRecvWrid;
        w.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(buf_.data()), static_cast<uint32_t>(buf_.size()), mr_.lkey});
        uint32_t i = 0;
        for (; i < n; ++i)
            if (ctx_.post_recv(qpn_, std::span(&w, 1))) break;
        return i;
    }

    // pp_connect_ctx: RTR then RTS (and, for UD, the address handle).
    std::string connect(const oob::PingpongDest& local, const oob::PingpongDest& remote) {
        AddressVector av;
        std::copy(remote.gid.begin(), remote.gid.end(), av.dgid.b.begin());
        av.sgid_index = static_cast<uint8_t>(gidx_);
        av.hop_limit = 1;
        QpAttr a;
        if (o_.ud) {
            a.qp_state = QpState::Rtr;
            if (ctx_.modify_qp(qpn_, a, transport::kAttrState)) return "Failed to modify QP to RTR: " + ctx_.last_error();
            a.qp_state = QpState::Rts;
            a.sq_psn = Psn{local.psn};
            if (ctx_.modify_qp(qpn_, a, transport::kAttrState | transport::kAttrSqPsn))
                return "Failed to modify QP to RTS: " + ctx_.last_error();
            if (ctx_.create_ah(pd_, av, ah_)) return "Failed to create AH: " + ctx_.last_error();
            remote_qpn_ = Qpn{remote.qpn};
            return {};
        }
        RcPeer peer;
        peer.mtu = mtu_;
        peer.av = av;
        peer.dest_qpn = Qpn{remote.qpn};
        peer.rq_psn = Psn{remote.psn};
        peer.sq_psn = Psn{local.psn};
        return connect_rc_qp(ctx_, qpn_, peer, "Failed to modify QP to RTR: ", "Failed to modify QP to RTS: ");
    }

    bool post_send() {
        SendWr w;
        w.wr_id = kSendWrid;
        w.opcode = WrOpcode::Send;
        w.send_flags = transport::kSendSignaled;
        const uint64_t at = reinterpret_cast<uint64_t>(buf_.data()) + (o_.ud ? kGrhBytes : 0);
        w.sg_list.push_back(Sge{at, size_, mr_.lkey});
        if (o_.ud) {
            w.ah = ah_;
            w.remote_qpn = remote_qpn_;
            w.remote_qkey = kUdQkey;
        }
        return ctx_.post_send(qpn_, std::span(&w, 1)) == 0;
    }

    // Completions, sleeping on the channel when there are none.
    int next_completions(std::span<Wc> wc) {
        int n = ctx_.poll_cq(cq_, wc);
        if (n != 0) return n;
        ctx_.req_notify_cq(cq_);
        n = ctx_.poll_cq(cq_, wc);
        if (n != 0) return n;
        CqHandle fired;
        channel_->get_cq_event(Nanos::from_ms(100), fired);
        return 0;
    }

    // rc_pingpong's loop: the client sends first; a side sends again once its
    // previous SEND completed and the peer's next message arrived.
    int pingpong() {
        uint64_t pending = kRecvWrid;
        const auto start = std::chrono::steady_clock::now();
        auto last_progress = start;
        if (!o_.server.empty()) {
            if (!post_send()) return fail("Couldn't post send: " + ctx_.last_error());
            pending |= kSendWrid;
        }
        int rcnt = 0, scnt = 0;
        while (rcnt < o_.iters || scnt < o_.iters) {
            Wc wc[2];
            const int ne = next_completions(wc);
            if (ne < 0) return fail(fmt::format("poll CQ failed {}", ne));
            const auto now = std::chrono::steady_clock::now();
            if (ne == 0) {
                if (now - last_progress > std::chrono::nanoseconds(kStallTimeout.v))
                    return fail(fmt::format("no completion for {:.0f} s (sent {}, received {} of {})",
                                            kStallTimeout.seconds(), scnt, rcnt, o_.iters));
                continue;
            }
            last_progress = now;
            for (int i = 0; i < ne; ++i) {
                if (wc[i].status != WcStatus::Success)
                    return fail(fmt::format("Failed status {} ({}) for wr_id {}", wc_status_str(wc[i].status),
                                            static_cast<int>(wc[i].status), wc[i].wr_id));
                switch (wc[i].wr_id) {
                    case kSendWrid: ++scnt; break;
                    case kRecvWrid:
                        if (--routs_ <= 1) {
                            routs_ += post_recvs(kRxDepth - routs_);
                            if (routs_ < kRxDepth) return fail("Couldn't post receive: " + ctx_.last_error());
                        }
                        ++rcnt;
                        break;
                    default: return fail(fmt::format("Completion for unknown wr_id {}", wc[i].wr_id));
                }
                pending &= ~wc[i].wr_id;
                if (scnt < o_.iters && !pending) {
                    if (!post_send()) return fail("Couldn't post send: " + ctx_.last_error());
                    pending = kRecvWrid | kSendWrid;
                }
            }
        }
        const double usec =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
        const long long bytes = static_cast<long long>(size_) * o_.iters * 2;
        fmt::print("{} bytes in {:.2f} seconds = {:.2f} Mbit/sec\n", bytes, usec / 1000000., bytes * 8. / usec);
        fmt::print("{} iters in {:.2f} seconds = {:.2f} usec/iter\n", o_.iters, usec / 1000000., usec / o_.iters);
        return 0;
    }

    const PingpongOptions& o_;
    Context& ctx_;
    int gidx_ = 0;
    PathMtu mtu_ = PathMtu::Mtu1024;
    uint32_t size_ = static_cast<uint32_t>(o_.size);
    std::vector<uint8_t> buf_;
    PdHandle pd_;
    MrHandle mr_;
    CqHandle cq_;
    std::unique_ptr<CompChannel> channel_;
    Qpn qpn_;
    AhHandle ah_;
    Qpn remote_qpn_;
    uint32_t routs_ = 0;
};

int run_pingpong(PingpongOptions o) {
    if (std::string e = check_nic_options(o); !e.empty()) {
        fmt::print(stderr, "rocemu pingpong: {}\n", e);
        return 1;
    }
    if (o.size < 0) o.size = o.ud ? 2048 : 4096;
    if (o.size < 1 || o.iters < 1 || o.tcp_port < 1 || o.tcp_port > 65535) {
        fmt::print(stderr, "rocemu pingpong: -s must be at least 1, -n at least 1 and -p 1-65535\n");
        return 1;
    }
    srand48(static_cast<long>(getpid()) * static_cast<long>(time(nullptr)));
    std::string error;
    int status;
    {
        std::unique_ptr<Context> ctx = open_nic(o, error);
        if (!ctx) {
            fmt::print(stderr, "rocemu pingpong: {}\n", error);
            return 1;
        }
        Pingpong pp(o, *ctx);
        status = pp.run();
        ctx->keep_port_open_at_exit();  // main() leaves with _Exit
    }
    return status;
}

}  // namespace

void add_pingpong_command(CLI::App& app, int& status) {
    auto o = std::make_shared<PingpongOptions>();
    CLI::App* cmd = app.add_subcommand(
        "pingpong",
        "ibv_rc_pingpong (or with --ud ibv_ud_pingpong) on an emulated NIC: the same TCP exchange (one 52-byte "
        "LID:QPN:PSN:GID record each way), QP setup and SEND/RECV ping-pong, so it pairs with the real tool. "
        "Server without SERVER_IP, client with it. EAL arguments go after `--`.");
    add_nic_options(cmd, *o);
    cmd->add_option("-s,--size", o->size, "message size (default 4096, or 2048 with --ud)");
    cmd->add_option("-n,--iters", o->iters, "number of exchanges")->capture_default_str();
    cmd->add_option("-p,--tcp-port", o->tcp_port, "TCP port of the address exchange")->capture_default_str();
    cmd->add_flag("--ud", o->ud, "UD QPs, as ibv_ud_pingpong");
    cmd->add_option("server", o->server, "the server's address (client mode)");
    cmd->add_option("eal", o->eal_args, "EAL arguments, after --");
    cmd->callback([o, &status] { status = run_pingpong(*o); });
}

void add_perf_command(CLI::App& app, int& status);  // cmd_perf.cpp

void add_verbs_commands(CLI::App& app, int& status) {
    add_pingpong_command(app, status);
    add_perf_command(app, status);
}

}  // namespace rocemu::cli

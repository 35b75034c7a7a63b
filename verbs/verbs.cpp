#include "verbs/verbs.hpp"

#include <fmt/format.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <sys/eventfd.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <boost/lockfree/queue.hpp>
#include <boost/lockfree/spsc_queue.hpp>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <functional>
#include <mutex>
#include <thread>

#include "dataplane/dpdk/capture.hpp"
#include "dataplane/dpdk/eal.hpp"
#include "dataplane/dpdk/host/mtu.hpp"
#include "dataplane/dpdk/roce_nic.hpp"
#include "dataplane/wire/describe.hpp"

namespace rocemu::verbs {

const char* wc_status_str(WcStatus s) {
    static constexpr const char* kNames[] = {
        "success",
        "local length error",
        "local QP operation error",
        "local EE context operation error",
        "local protection error",
        "Work Request Flushed Error",
        "memory management operation error",
        "bad response error",
        "local access error",
        "remote invalid request error",
        "remote access error",
        "remote operation error",
        "transport retry counter exceeded",
        "RNR retry counter exceeded",
        "local RDD violation error",
        "remote invalid RD request",
        "aborted error",
        "invalid EE context number",
        "invalid EE context state",
        "fatal error",
        "response timeout error",
        "general error",
    };
    const auto i = static_cast<size_t>(s);
    return i < std::size(kNames) ? kNames[i] : "unknown";
}

namespace {

constexpr uint32_t kPostQueueDepth = 4096;
constexpr uint32_t kIdlePollsBeforeSleep = 64;
constexpr uint32_t kMaxChannels = 64;
const Nanos kArpTimeout = Nanos::from_s(5);
const Nanos kArpRetry = Nanos::from_s(1);  // the ARP cache's retransmit_time
// How long dereg_mr drives the NIC for zero-copy frames of the MR to leave.
const Nanos kDeregDrain = Nanos::from_s(1);

// A WR on its way from an application thread to the poll thread. RECVs use
// wr.wr_id and wr.sg_list only.
struct PostItem {
    enum class Kind : uint8_t { Send, Recv, SrqRecv };
    Kind kind = Kind::Send;
    uint32_t target = 0;  // QPN or SRQ handle
    SendWr wr;
};

PathMtu to_path_mtu(uint64_t bytes) {
    if (bytes >= 4096) return PathMtu::Mtu4096;
    if (bytes >= 2048) return PathMtu::Mtu2048;
    if (bytes >= 1024) return PathMtu::Mtu1024;
    if (bytes >= 512) return PathMtu::Mtu512;
    return PathMtu::Mtu256;
}

// A port's max_mtu, by rxe's rule (host::active_mtu).
PathMtu max_path_mtu(uint32_t port_mtu) { return to_path_mtu(host::active_mtu(Bytes{port_mtu}).v); }

}  // namespace

struct CompChannel::State {
    boost::lockfree::spsc_queue<uint32_t> fired{1024};
};

struct CqState {
    bool live = false;
    int channel = -1;
    std::atomic<bool> armed{false};
    // Lcore mode: completions the poll thread moved out of the engine.
    std::unique_ptr<boost::lockfree::spsc_queue<Wc>> done;
};

struct Context::Impl {
    DeviceOptions opts;
    Progress mode = Progress::App;
    std::unique_ptr<dpdk::Port> port;
    std::unique_ptr<dpdk::Capture> capture;
    std::unique_ptr<host::HostStack> stack;
    std::unique_ptr<transport::Engine> engine;
    std::unique_ptr<dpdk::EngineUpper> upper;
    std::unique_ptr<dpdk::TscClock> clock;
    std::unique_ptr<dpdk::Nic<dpdk::EngineUpper>> nic;
    std::string error;

    std::vector<CqState> cqs;                 // by engine CQ handle; sized once
    std::vector<uint32_t> qp_send_cq, qp_recv_cq;  // by qpn - kFirstQpn
    std::array<CompChannel::State*, kMaxChannels> channels{};
    std::array<int, kMaxChannels> channel_fds{};

    // Lcore mode.
    std::unique_ptr<boost::lockfree::queue<PostItem, boost::lockfree::fixed_sized<true>>> posts;
    std::optional<PostItem> stalled;  // poll thread only: a WR waiting for SQ/RQ room
    std::thread poller;
    std::atomic<bool> stop{false};
    std::mutex ctl_mu;  // control path only: one control call at a time
    std::function<void()> ctl_fn;
    std::atomic<int> ctl_state{0};  // 0 idle, 1 posted, 2 done
    uint32_t idle = 0;

    static std::vector<Impl*>& app_contexts() {
        static std::vector<Impl*> v;
        return v;
    }

    int fail(int err, std::string msg) {
        error = std::move(msg);
        return err;
    }
    int fail(const transport::VerbsError& e) {
        error = e.msg;
        return e.err;
    }

    // Runs `f` where the engine may be touched: here in App mode, on the poll
    // thread between bursts in Lcore mode.
    template <typename F>
    void run_ctl(F&& f) {
        if (mode == Progress::App) {
            f();
            return;
        }
        std::lock_guard g(ctl_mu);
        ctl_fn = std::forward<F>(f);
        ctl_state.store(1, std::memory_order_release);
        while (ctl_state.load(std::memory_order_acquire) != 2) std::this_thread::yield();
        ctl_state.store(0, std::memory_order_relaxed);
        ctl_fn = nullptr;
    }

    // Waits for the poll loops to move while a control call is pending.
    void wait_turn() {
        if (mode == Progress::App) {
            for (Impl* c : app_contexts()) c->nic->poll();
        } else {
            std::this_thread::yield();
        }
    }

    void fire(uint32_t cq) {
        CqState& s = cqs[cq];
        if (s.channel < 0 || !s.armed.exchange(false, std::memory_order_acq_rel)) return;
        channels[s.channel]->fired.push(cq);
        const uint64_t one = 1;
        [[maybe_unused]] const ssize_t w = ::write(channel_fds[s.channel], &one, sizeof one);
    }

    // One turn of the poll loop, then CQ events handed on.
    // One turn; the frames received, plus one if the engine still has some to send.
    uint32_t turn() {
        const uint32_t work = nic->poll() + (engine->tx_pending(nic->now()) ? 1u : 0u);
        transport::Effects& fx = upper->effects();
        if (mode == Progress::App) {
            for (const CqHandle& h : fx.cq_events) fire(h.id);
        }
        fx.clear();
        return work;
    }

    // Lcore mode: receive WRs queued for the poll thread, to a QP (Recv) or an
    // SRQ (SrqRecv); ENOMEM with *bad_wr at the first that finds the queue full.
    int queue_recvs(PostItem::Kind kind, uint32_t target, std::span<const RecvWr> wrs, size_t* bad_wr) {
        for (size_t i = 0; i < wrs.size(); ++i) {
            PostItem it;
            it.kind = kind;
            it.target = target;
            it.wr.wr_id = wrs[i].wr_id;
            it.wr.sg_list = wrs[i].sg_list;
            if (!posts->bounded_push(it)) {
                if (bad_wr) *bad_wr = i;
                return ENOMEM;
            }
        }
        return 0;
    }

    // A WR the engine refused on the poll thread: completes with an error.
    void refuse(const PostItem& it) {
        const uint32_t idx = it.target - transport::Engine::kFirstQpn;
        if (it.kind == PostItem::Kind::SrqRecv || idx >= qp_send_cq.size()) return;
        const uint32_t cq = it.kind == PostItem::Kind::Send ? qp_send_cq[idx] : qp_recv_cq[idx];
        if (cq == 0 || !cqs[cq].done) return;
        Wc wc;
        wc.wr_id = it.wr.wr_id;
        wc.status = WcStatus::LocQpOpErr;
        wc.opcode = it.kind == PostItem::Kind::Send ? WcOpcode::Send : WcOpcode::Recv;
        wc.qp_num = Qpn{it.target};
        cqs[cq].done->push(wc);
        fire(cq);
    }

    // False when the engine has no room yet (the WR is kept for later).
    bool apply(const PostItem& it) {
        transport::Effects& fx = upper->effects();
        transport::VerbsError e;
        switch (it.kind) {
            case PostItem::Kind::Send:
                e = engine->post_send(Qpn{it.target}, std::span(&it.wr, 1), fx);
                break;
            case PostItem::Kind::Recv:
            case PostItem::Kind::SrqRecv: {
                RecvWr r;
                r.wr_id = it.wr.wr_id;
                r.sg_list = it.wr.sg_list;
                e = it.kind == PostItem::Kind::Recv ? engine->post_recv(Qpn{it.target}, std::span(&r, 1), fx)
                                                    : engine->post_srq_recv(SrqHandle{it.target}, std::span(&r, 1));
                break;
            }
        }
        if (e.err == ENOMEM) return false;
        if (e) refuse(it);
        return true;
    }

    void poller_loop() {
        rte_thread_register();
        Wc batch[32];
        while (!stop.load(std::memory_order_relaxed)) {
            if (ctl_state.load(std::memory_order_acquire) == 1) {
                ctl_fn();
                ctl_state.store(2, std::memory_order_release);
            }
            uint32_t work = 0;
            if (stalled && apply(*stalled)) stalled.reset();
            PostItem it;
            while (!stalled && work < 256 && posts->pop(it)) {
                ++work;
                if (!apply(it)) stalled = it;
            }
            work += nic->poll();
            upper->effects().clear();
            for (uint32_t id = 1; id < cqs.size(); ++id) {
                CqState& s = cqs[id];
                if (!s.live) continue;
                bool moved = false;
                for (;;) {
                    const uint32_t room = static_cast<uint32_t>(std::min<size_t>(s.done->write_available(), 32));
                    if (room == 0) break;
                    const uint32_t n = engine->poll_cq(CqHandle{id}, std::span(batch, room));
                    if (n == 0) break;
                    s.done->push(batch, n);
                    moved = true;
                    work += n;
                }
                if (moved) fire(id);
            }
            idle = work ? 0 : idle + 1;
            if (!opts.busy_poll && idle > kIdlePollsBeforeSleep && !engine->tx_pending(nic->now())) {
                const timespec ts{0, 20000};
                nanosleep(&ts, nullptr);
            }
        }
    }
};

Context::Context(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

void Context::keep_port_open_at_exit() {
    if (impl_->port) impl_->port->keep_open_at_exit();
}

Context::~Context() {
    Impl& m = *impl_;
    if (m.mode == Progress::Lcore) {
        m.stop = true;
        if (m.poller.joinable()) m.poller.join();
    } else {
        auto& v = Impl::app_contexts();
        std::erase(v, impl_.get());
    }
    m.nic.reset();
    m.upper.reset();
    m.engine.reset();
    m.capture.reset();
    m.port.reset();
}

std::unique_ptr<Context> Context::open(const DeviceOptions& opts, const std::vector<std::string>& eal_args,
                                       std::string& error) {
    if (!host::make_host_config(opts.host, wire::MacAddr{{0x02, 0, 0, 0, 0, 1}}, error)) return nullptr;
    if (!dpdk::Eal::init(eal_args, error)) return nullptr;
    auto m = std::make_unique<Impl>();
    m->opts = opts;
    m->mode = opts.progress;
    dpdk::PortConfig pc;
    pc.devspec = opts.devspec;
    pc.mbufs = opts.mbufs;
    pc.link_wait = opts.link_wait;
    pc.min_frame_room = transport::Engine::kMinTxBuf;
    if (opts.mtu_set) pc.mtu = static_cast<uint16_t>(opts.host.port_mtu);
    m->port = opts.attach_port >= 0 ? dpdk::Port::attach(static_cast<uint16_t>(opts.attach_port), pc, error)
                                    : dpdk::Port::open(pc, error);
    if (!m->port) return nullptr;
    host::HostOptions ho = opts.host;
    ho.port_mtu = m->port->mtu();
    const std::optional<host::HostConfig> hc = host::make_host_config(ho, m->port->mac(), error);
    if (!hc) return nullptr;
    if (hc->mac != m->port->mac()) m->port->set_promiscuous(true);
    if (!opts.capture.empty()) {
        m->capture = dpdk::Capture::open(opts.capture, m->port->mtu() + 64u, error);
        if (!m->capture) return nullptr;
    }
    m->stack = std::make_unique<host::HostStack>(*hc);
    transport::EngineConfig base;
    base.max_qp = opts.max_qp;
    base.max_cqe = opts.max_cqe;
    transport::VerbsError e;
    dpdk::NicProfile profile = opts.nic;
    profile.port_speed = opts.link_speed;
    profile.pfc_priority = opts.pfc_priority;
    m->engine = transport::Engine::create(dpdk::engine_config(*m->stack, profile, *m->port, base), e);
    if (!m->engine) {
        error = e.msg;
        return nullptr;
    }
    const transport::EngineConfig& ec = m->engine->config();
    m->cqs = std::vector<CqState>(ec.max_cq + 1);
    m->qp_send_cq.assign(ec.max_qp, 0);
    m->qp_recv_cq.assign(ec.max_qp, 0);
    m->channel_fds.fill(-1);
    m->upper = std::make_unique<dpdk::EngineUpper>(*m->engine, profile);
    m->clock = std::make_unique<dpdk::TscClock>(dpdk::TscClock::starting_now());
    dpdk::NicConfig nc = dpdk::nic_config(profile);
    nc.tx_drain = opts.tx_drain;
    m->nic = std::make_unique<dpdk::Nic<dpdk::EngineUpper>>(*m->port, *m->stack, *m->upper, *m->clock,
                                                            m->capture.get(), nc);
    m->nic->poll();
    m->nic->announce();
    if (m->mode == Progress::Lcore) {
        m->posts = std::make_unique<boost::lockfree::queue<PostItem, boost::lockfree::fixed_sized<true>>>(
            kPostQueueDepth);
        m->poller = std::thread([p = m.get()] { p->poller_loop(); });
    } else {
        Impl::app_contexts().push_back(m.get());
    }
    return std::unique_ptr<Context>(new Context(std::move(m)));
}

const std::string& Context::name() const { return impl_->port->name(); }
const std::string& Context::driver() const { return impl_->port->driver(); }
const std::string& Context::last_error() const { return impl_->error; }

int Context::query_device(DeviceAttr& out) const {
    const transport::EngineConfig& c = impl_->engine->config();
    out = {};
    out.fw_ver = "rocemu 0.1.0";
    const auto& mac = c.mac.b;
    out.node_guid = uint64_t{static_cast<uint8_t>(mac[0] ^ 2)} << 56 | uint64_t{mac[1]} << 48 | uint64_t{mac[2]} << 40 |
                    uint64_t{0xff} << 32 | uint64_t{0xfe} << 24 | uint64_t{mac[3]} << 16 | uint64_t{mac[4]} << 8 |
                    mac[5];
    out.max_qp = c.max_qp;
    out.max_qp_wr = c.max_qp_wr;
    out.max_sge = transport::kMaxSge;
    out.max_cq = c.max_cq;
    out.max_cqe = c.max_cqe;
    out.max_mr = c.max_mr;
    out.max_srq = c.max_srq;
    out.max_ah = c.max_ah;
    out.max_qp_rd_atom = 16;
    return 0;
}

int Context::query_port(uint8_t port_num, PortAttr& out) const {
    if (port_num != 1) return impl_->fail(EINVAL, fmt::format("port_num {} does not exist; the device has port 1", port_num));
    out = {};
    out.state = impl_->port->link_up() ? PortState::Active : PortState::Down;
    out.max_mtu = max_path_mtu(impl_->port->mtu());
    out.active_mtu = impl_->engine->config().active_mtu;
    out.gid_tbl_len = static_cast<uint32_t>(impl_->stack->gids().size());
    return 0;
}

int Context::query_gid(uint8_t port_num, int index, Gid& out) const {
    const host::GidTable& t = impl_->stack->gids();
    if (port_num != 1 || index < 0 || static_cast<size_t>(index) >= t.size())
        return impl_->fail(EINVAL, fmt::format("GID index {} does not exist: port 1 has indexes 0-{}", index,
                                               t.size() - 1));
    out = t[static_cast<size_t>(index)].gid.b;
    return 0;
}

int Context::query_gid_type(uint8_t port_num, int index, GidType& out) const {
    Gid g;
    if (const int e = query_gid(port_num, index, g)) return e;
    out = impl_->stack->gids()[static_cast<size_t>(index)].type == host::GidType::RoceV1 ? GidType::RoceV1
                                                                                          : GidType::RoceV2;
    return 0;
}

int Context::check_gid_index(uint8_t port_num, int index) const {
    if (port_num != 1) return impl_->fail(EINVAL, fmt::format("port_num {} does not exist; the device has port 1", port_num));
    const host::GidCheck c = impl_->stack->gids().check_sgid_index(index < 0 ? ~0u : static_cast<uint32_t>(index));
    return c.ok() ? 0 : impl_->fail(EINVAL, c.error);
}

int Context::default_gid_index() const { return impl_->stack->gids().default_v2_index(); }

int Context::alloc_pd(PdHandle& out) {
    transport::Result<PdHandle> r;
    impl_->run_ctl([&] { r = impl_->engine->alloc_pd(); });
    if (!r.ok()) return impl_->fail(r.error);
    out = r.value;
    return 0;
}

int Context::dealloc_pd(PdHandle pd) {
    transport::VerbsError e;
    impl_->run_ctl([&] { e = impl_->engine->dealloc_pd(pd); });
    return e ? impl_->fail(e) : 0;
}

int Context::reg_mr(PdHandle pd, void* addr, size_t length, uint32_t access, MrHandle& out) {
    transport::Result<MrHandle> r;
    impl_->run_ctl([&] { r = impl_->engine->reg_mr(pd, addr, length, access); });
    if (!r.ok()) return impl_->fail(r.error);
    out = r.value;
    return 0;
}

int Context::dereg_mr(MrHandle mr) {
    // Zero-copy frames pin the MR until the device has read them; some may
    // still wait in the NIC's TX queue. The poll loops send them (and free
    // their mbufs) while we wait; EBUSY only if they do not within kDeregDrain.
    Impl& m = *impl_;
    const Nanos deadline = m.clock->now() + kDeregDrain;
    for (;;) {
        transport::VerbsError e;
        m.run_ctl([&] { e = m.engine->dereg_mr(mr); });
        if (!e) return 0;
        if (e.err != EBUSY || m.clock->now() >= deadline) return m.fail(e);
        m.wait_turn();
    }
}

int Context::create_comp_channel(std::unique_ptr<CompChannel>& out) {
    Impl& m = *impl_;
    for (uint32_t i = 0; i < kMaxChannels; ++i) {
        if (m.channels[i]) continue;
        const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (fd < 0) return m.fail(errno, fmt::format("eventfd: {}", std::strerror(errno)));
        auto st = std::make_unique<CompChannel::State>();
        m.channels[i] = st.get();
        m.channel_fds[i] = fd;
        out.reset(new CompChannel(m, fd, std::move(st)));
        return 0;
    }
    return m.fail(ENOMEM, fmt::format("at most {} completion channels", kMaxChannels));
}

int Context::create_cq(uint32_t cqe, CompChannel* channel, CqHandle& out) {
    Impl& m = *impl_;
    int ch = -1;
    if (channel) {
        for (uint32_t i = 0; i < kMaxChannels; ++i)
            if (m.channel_fds[i] == channel->fd()) ch = static_cast<int>(i);
        if (ch < 0) return m.fail(EINVAL, "the completion channel belongs to another device");
    }
    transport::Result<CqHandle> r;
    m.run_ctl([&] {
        r = m.engine->create_cq(cqe);
        if (!r.ok()) return;
        CqState& s = m.cqs[r.value.id];
        s.channel = ch;
        s.armed = false;
        if (m.mode == Progress::Lcore) s.done = std::make_unique<boost::lockfree::spsc_queue<Wc>>(cqe + 1);
        s.live = true;
    });
    if (!r.ok()) return m.fail(r.error);
    out = r.value;
    return 0;
}

int Context::destroy_cq(CqHandle cq) {
    Impl& m = *impl_;
    transport::VerbsError e;
    m.run_ctl([&] {
        e = m.engine->destroy_cq(cq);
        if (e) return;
        m.cqs[cq.id].live = false;
        m.cqs[cq.id].done.reset();
    });
    return e ? m.fail(e) : 0;
}

int Context::create_srq(PdHandle pd, uint32_t max_wr, uint32_t max_sge, SrqHandle& out) {
    transport::Result<SrqHandle> r;
    impl_->run_ctl([&] { r = impl_->engine->create_srq(pd, max_wr, max_sge); });
    if (!r.ok()) return impl_->fail(r.error);
    out = r.value;
    return 0;
}

int Context::destroy_srq(SrqHandle srq) {
    transport::VerbsError e;
    impl_->run_ctl([&] { e = impl_->engine->destroy_srq(srq); });
    return e ? impl_->fail(e) : 0;
}

namespace {

// Completes `av` (GID index, ARP) with the poll loops turning meanwhile.
int resolve(Context::Impl& m, AddressVector& av, uint64_t cookie) {
    const Nanos deadline = m.clock->now() + kArpTimeout;
    for (;;) {
        host::PathResult r;
        m.run_ctl([&] { r = dpdk::fill_av(*m.nic, av, cookie); });
        switch (r.status) {
            case host::PathResult::Status::Ready: return 0;
            case host::PathResult::Status::Error: return m.fail(EINVAL, r.error);
            case host::PathResult::Status::Pending: break;
        }
        // Each Pending call takes one of the ARP cache's bounded waiter
        // slots: ask again once the address is learned, or when the cache
        // probes again.
        const Nanos retry = m.clock->now() + kArpRetry;
        bool learned = false;
        while (!learned && m.clock->now() < retry) {
            if (m.opts.interrupted && m.opts.interrupted())
                return m.fail(EINTR, fmt::format("interrupted while waiting for the ARP reply for {}",
                                                 wire::format_ip(av.dgid)));
            m.wait_turn();
            if (av.dgid.is_v4())
                m.run_ctl([&] { learned = m.stack->arp().lookup(av.dgid.v4(), m.nic->now()).has_value(); });
        }
        if (m.clock->now() > deadline)
            return m.fail(ETIMEDOUT, fmt::format("no ARP reply for {} within {:.0f} s", wire::format_ip(av.dgid),
                                                 kArpTimeout.seconds()));
    }
}

}  // namespace

int Context::create_ah(PdHandle pd, AddressVector av, AhHandle& out) {
    if (const int e = resolve(*impl_, av, 0)) return e;
    transport::Result<AhHandle> r;
    impl_->run_ctl([&] { r = impl_->engine->create_ah(pd, av); });
    if (!r.ok()) return impl_->fail(r.error);
    out = r.value;
    return 0;
}

int Context::destroy_ah(AhHandle ah) {
    transport::VerbsError e;
    impl_->run_ctl([&] { e = impl_->engine->destroy_ah(ah); });
    return e ? impl_->fail(e) : 0;
}

int Context::create_qp(const QpInitAttr& init, Qpn& out) {
    Impl& m = *impl_;
    transport::Result<Qpn> r;
    QpInitAttr ia = init;
    ia.peer_accepts_cnp = ia.peer_accepts_cnp || m.opts.nic.cnp_enabled();
    m.run_ctl([&] {
        r = m.engine->create_qp(ia);
        if (!r.ok()) return;
        const uint32_t idx = r.value.v - transport::Engine::kFirstQpn;
        m.qp_send_cq[idx] = init.send_cq.id;
        m.qp_recv_cq[idx] = init.recv_cq.id;
    });
    if (!r.ok()) return m.fail(r.error);
    out = r.value;
    return 0;
}

int Context::modify_qp(Qpn qpn, const QpAttr& attr, uint32_t mask) {
    Impl& m = *impl_;
    QpAttr a = attr;
    // As rxe: a path MTU above the port's max_mtu is refused, not sent in
    // frames the port cannot carry (they would be dropped as oversize).
    if (mask & transport::kAttrPathMtu) {
        const uint8_t v = static_cast<uint8_t>(a.path_mtu);
        const PathMtu max = max_path_mtu(m.port->mtu());
        if (v >= 1 && v <= 5 && v > static_cast<uint8_t>(max))
            return m.fail(EINVAL, fmt::format("path_mtu {} is larger than port 1's max_mtu {} (port MTU {}; a path "
                                              "MTU needs 80 bytes of headers besides): raise the port MTU "
                                              "(rocemu: --port-mtu) or ask for at most {}",
                                              transport::mtu_bytes(a.path_mtu), transport::mtu_bytes(max),
                                              m.port->mtu(), transport::mtu_bytes(max)));
    }
    if (mask & transport::kAttrAv)
        if (const int e = resolve(m, a.ah_attr, qpn.v)) return e;
    transport::VerbsError e;
    m.run_ctl([&] { e = m.engine->modify_qp(qpn, a, mask, m.upper->effects()); });
    return e ? m.fail(e) : 0;
}

int Context::query_qp(Qpn qpn, QpAttr& attr, QpInitAttr& init) {
    transport::VerbsError e;
    impl_->run_ctl([&] { e = impl_->engine->query_qp(qpn, attr, init); });
    return e ? impl_->fail(e) : 0;
}

int Context::destroy_qp(Qpn qpn) {
    transport::VerbsError e;
    impl_->run_ctl([&] {
        e = impl_->engine->destroy_qp(qpn);
        if (!e) impl_->upper->on_qp_destroyed(qpn);
    });
    return e ? impl_->fail(e) : 0;
}

int Context::post_send(Qpn qpn, std::span<const SendWr> wrs, size_t* bad_wr) {
    Impl& m = *impl_;
    if (m.mode == Progress::App) {
        const transport::VerbsError e = m.engine->post_send(qpn, wrs, m.upper->effects(), bad_wr);
        return e ? m.fail(e) : 0;
    }
    for (size_t i = 0; i < wrs.size(); ++i) {
        PostItem it;
        it.kind = PostItem::Kind::Send;
        it.target = qpn.v;
        it.wr = wrs[i];
        if (!m.posts->bounded_push(it)) {
            if (bad_wr) *bad_wr = i;
            return ENOMEM;
        }
    }
    return 0;
}

int Context::post_recv(Qpn qpn, std::span<const RecvWr> wrs, size_t* bad_wr) {
    Impl& m = *impl_;
    if (m.mode == Progress::App) {
        const transport::VerbsError e = m.engine->post_recv(qpn, wrs, m.upper->effects(), bad_wr);
        return e ? m.fail(e) : 0;
    }
    return m.queue_recvs(PostItem::Kind::Recv, qpn.v, wrs, bad_wr);
}

int Context::post_srq_recv(SrqHandle srq, std::span<const RecvWr> wrs, size_t* bad_wr) {
    Impl& m = *impl_;
    if (m.mode == Progress::App) {
        const transport::VerbsError e = m.engine->post_srq_recv(srq, wrs, bad_wr);
        return e ? m.fail(e) : 0;
    }
    return m.queue_recvs(PostItem::Kind::SrqRecv, srq.id, wrs, bad_wr);
}

int Context::poll_cq(CqHandle cq, std::span<Wc> out) {
    Impl& m = *impl_;
    if (cq.id == 0 || cq.id >= m.cqs.size() || !m.cqs[cq.id].live) return -EINVAL;
    if (m.mode == Progress::Lcore) return static_cast<int>(m.cqs[cq.id].done->pop(out.data(), out.size()));
    uint32_t n = m.engine->poll_cq(cq, out);
    if (n == 0) {
        for (Impl* c : Impl::app_contexts()) c->turn();
        n = m.engine->poll_cq(cq, out);
    }
    return static_cast<int>(n);
}

int Context::req_notify_cq(CqHandle cq) {
    Impl& m = *impl_;
    if (cq.id == 0 || cq.id >= m.cqs.size() || !m.cqs[cq.id].live) return m.fail(EINVAL, "unknown CQ");
    if (m.cqs[cq.id].channel < 0) return m.fail(EINVAL, "the CQ has no completion channel");
    m.cqs[cq.id].armed.store(true, std::memory_order_release);
    return 0;
}

uint32_t Context::progress() {
    uint32_t work = 0;
    if (impl_->mode == Progress::App)
        for (Impl* c : Impl::app_contexts()) work += c->turn();
    return work;
}

int Context::query_counters(Counters& port) {
    impl_->run_ctl([&] { port = impl_->engine->counters(); });
    return 0;
}

int Context::query_qp_counters(Qpn qpn, Counters& out) {
    bool found = false;
    impl_->run_ctl([&] {
        if (const Counters* c = impl_->engine->qp_counters(qpn)) {
            out = *c;
            found = true;
        }
    });
    return found ? 0 : impl_->fail(EINVAL, fmt::format("QP {:#x} does not exist", qpn.v));
}

std::vector<std::pair<std::string, uint64_t>> Context::port_counters() const {
    // The board lags the loop by up to its publish period, and in App mode
    // by however long the application has not polled: publish first, so
    // the frames of a run just ended are counted.
    impl_->run_ctl([&] { impl_->nic->publish(); });
    const dpdk::CounterBoard& b = impl_->nic->board();
    std::vector<std::pair<std::string, uint64_t>> out;
    for (size_t i = 0; i < b.size(); ++i) out.emplace_back(b.name(i), b.value(i));
    return out;
}

CompChannel::CompChannel(Context::Impl& ctx, int fd, std::unique_ptr<State> st)
    : ctx_(ctx), fd_(fd), st_(std::move(st)) {}

CompChannel::~CompChannel() {
    for (uint32_t i = 0; i < kMaxChannels; ++i) {
        if (ctx_.channel_fds[i] != fd_) continue;
        // CQs still on it stop reporting events (ibverbs refuses to destroy
        // such a channel; a destructor cannot): an armed CQ that completes
        // later must not reach the freed channel.
        ctx_.run_ctl([&] {
            ctx_.channels[i] = nullptr;
            ctx_.channel_fds[i] = -1;
            for (CqState& cq : ctx_.cqs)
                if (cq.channel == static_cast<int>(i)) cq.channel = -1;
        });
    }
    ::close(fd_);
}

int CompChannel::get_cq_event(Nanos timeout, CqHandle& out) {
    const Nanos deadline = ctx_.clock->now() + timeout;
    for (;;) {
        uint32_t id = 0;
        if (st_->fired.pop(id)) {
            uint64_t v;
            [[maybe_unused]] const ssize_t r = ::read(fd_, &v, sizeof v);
            out = CqHandle{id};
            return 0;
        }
        if (ctx_.clock->now() >= deadline) return ETIMEDOUT;
        if (ctx_.mode == Progress::App) {
            for (Context::Impl* c : Context::Impl::app_contexts()) c->turn();
        } else {
            pollfd p{fd_, POLLIN, 0};
            ::poll(&p, 1, 1);
        }
    }
}

std::vector<std::string> get_device_list() {
    std::vector<std::string> names;
    uint16_t id;
    RTE_ETH_FOREACH_DEV(id) {
        char name[RTE_ETH_NAME_MAX_LEN];
        if (rte_eth_dev_get_name_by_port(id, name) == 0) names.emplace_back(name);
    }
    return names;
}

void keep_pinned(std::vector<uint8_t>&& mem) {
    static auto* kept = new std::vector<std::vector<uint8_t>>;
    kept->push_back(std::move(mem));
}

}  // namespace rocemu::verbs

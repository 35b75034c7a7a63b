#include "fabric/live/shared_clock.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

namespace rocemu::fabric::live {

namespace {

template <typename T>
T load(T& word) {
    return std::atomic_ref<T>(word).load(std::memory_order_acquire);
}
template <typename T>
void store(T& word, T v) {
    std::atomic_ref<T>(word).store(v, std::memory_order_release);
}

bool gone(int32_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

}  // namespace

std::unique_ptr<SharedClock> SharedClock::open(const std::string& path, uint32_t nodes, uint32_t self,
                                               std::string& error) {
    if (self >= nodes) {
        error = fmt::format("shared fabric clock {}: slot {} of {}", path, self, nodes);
        return nullptr;
    }
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        error = fmt::format("shared fabric clock {}: {}", path, std::strerror(errno));
        return nullptr;
    }
    const size_t bytes = sizeof(Slot) * nodes * 2;
    // Every node of the run asks for the same size, and growing fills with
    // zeros (free slots); a larger file (another fabric's, earlier) is kept.
    struct stat st {};
    bool ok = fstat(fd, &st) == 0 && (static_cast<size_t>(st.st_size) >= bytes ||
                                      ftruncate(fd, static_cast<off_t>(bytes)) == 0);
    void* p = ok ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (p == MAP_FAILED) {
        error = fmt::format("shared fabric clock {}: {}", path, std::strerror(errno));
        ::close(fd);
        return nullptr;
    }
    ::close(fd);
    const uint64_t domain = static_cast<uint64_t>(st.st_dev) << 40 ^ static_cast<uint64_t>(st.st_ino);
    return std::unique_ptr<SharedClock>(new SharedClock(static_cast<Slot*>(p), bytes, nodes, self, domain == 0 ? 1 : domain));
}

SharedClock::~SharedClock() {
    leave();
    store(slots_[nodes_ + self_].pid, int32_t{0});
    munmap(slots_, bytes_);
}

void SharedClock::attach(std::shared_ptr<ClockRelay> r, Nanos every) {
    relay_ = std::move(r);
    relay_every_ = every;
    next_relay_ = Nanos{};
    if (relay_) relay_->set_domain(domain_);
}

Nanos SharedClock::join(Nanos own) {
    drop_gone();
    const Nanos others = others_min();
    const Nanos start = others != Nanos::max() && others > own ? others : own;
    Slot& s = slots_[self_];
    store(s.now, start.v);
    store(s.pid, static_cast<int32_t>(getpid()));
    joined_ = true;
    return start;
}

void SharedClock::leave() {
    if (!joined_) return;
    store(slots_[self_].pid, int32_t{0});
    joined_ = false;
}

void SharedClock::publish(Nanos now, Nanos real) {
    if (!joined_) return;
    store(slots_[self_].now, now.v);
    if (!relay_ || real < next_relay_) return;
    next_relay_ = real + relay_every_;
    const Nanos view = relay_->exchange(machine_min(), real);
    Slot& s = slots_[nodes_ + self_];
    if (view == Nanos::max()) {
        store(s.pid, int32_t{0});
    } else {
        // The time first: a reader that sees the pid reads a time of it.
        store(s.now, view.v);
        store(s.pid, static_cast<int32_t>(getpid()));
    }
}

Nanos SharedClock::others_min() const { return least(2 * nodes_, self_); }

Nanos SharedClock::least(uint32_t end, uint32_t skip) const {
    int64_t t = Nanos::max().v;
    for (uint32_t i = 0; i < end; ++i) {
        if (i == skip || load(slots_[i].pid) == 0) continue;
        t = std::min(t, load(slots_[i].now));
    }
    return Nanos{t};
}

void SharedClock::drop_gone() {
    for (uint32_t i = 0; i < 2 * nodes_; ++i) {
        if (i == self_) continue;
        int32_t pid = load(slots_[i].pid);
        if (pid == 0 || !gone(pid)) continue;
        // Only if it is still that process's: a node joining again has
        // written its own pid.
        std::atomic_ref<int32_t>(slots_[i].pid).compare_exchange_strong(pid, 0);
    }
}

}  // namespace rocemu::fabric::live

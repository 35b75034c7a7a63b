// Copies between a contiguous buffer and a scatter/gather list at a byte
// offset: the requester's one payload copy into the frame, and the
// completer's placement of READ and atomic results. Keys were checked when
// the WQE started, so these only walk and copy.
#pragma once

#include <cstdint>
#include <cstring>

#include "dataplane/transport/frame.hpp"
#include "dataplane/transport/types.hpp"

namespace rocemu::transport {

// `null_sges`: bit i set when SGE i is in a null MR, which gives zeros.
inline void sgl_gather(const SgeList& sgl, uint8_t null_sges, uint64_t off, FrameWriter& dst, uint32_t len) {
    for (uint32_t i = 0; i < sgl.size(); ++i) {
        const Sge& s = sgl[i];
        if (len == 0) return;
        if (off >= s.length) {
            off -= s.length;
            continue;
        }
        const uint32_t n = static_cast<uint32_t>(s.length - off) < len ? static_cast<uint32_t>(s.length - off) : len;
        if (null_sges >> i & 1) dst.put_zeros(n);
        else dst.put(reinterpret_cast<const uint8_t*>(s.addr) + off, n, reinterpret_cast<const uint8_t*>(s.addr) + s.length);
        len -= n;
        off = 0;
    }
}

// The SGE that holds all of [off, off + len) of the list, with `off` made
// relative to it; null when the range spans SGEs.
inline const Sge* sgl_within(const SgeList& sgl, uint64_t& off, uint32_t len) {
    for (const Sge& s : sgl) {
        if (off < s.length) return len <= s.length - off ? &s : nullptr;
        off -= s.length;
    }
    return nullptr;
}

inline void sgl_scatter(const SgeList& sgl, uint64_t off, const uint8_t* src, uint32_t len) {
    for (const Sge& s : sgl) {
        if (len == 0) return;
        if (off >= s.length) {
            off -= s.length;
            continue;
        }
        const uint32_t n = static_cast<uint32_t>(s.length - off) < len ? static_cast<uint32_t>(s.length - off) : len;
        place(reinterpret_cast<uint8_t*>(s.addr) + off, src, n);
        src += n;
        len -= n;
        off = 0;
    }
}

}  // namespace rocemu::transport

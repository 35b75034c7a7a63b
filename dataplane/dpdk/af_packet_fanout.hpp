#pragma once
// DPDK's af_packet PMD puts every socket of a port in the PACKET_FANOUT group
// (getpid() ^ ifindex) & 0xffff. Groups are per network namespace, so two
// processes in one namespace whose pid ^ ifindex agree for different
// interfaces collide: the second one's PACKET_FANOUT fails with EINVAL and its
// port does not probe ("could not set PACKET_FANOUT ... Invalid argument").
//
// rocemu's executables export their own setsockopt (af_packet_fanout.cpp),
// which the PMD's call binds to. It passes every call to the kernel as it is;
// only when PACKET_FANOUT fails with EINVAL does it have the kernel pick an
// unused group (PACKET_FANOUT_FLAG_UNIQUEID) and put the port's later sockets
// (its other queue pairs) in that group too.
namespace rocemu::dpdk {

// How many fanout groups this process had to move so far.
unsigned af_packet_fanout_groups_moved();

}  // namespace rocemu::dpdk

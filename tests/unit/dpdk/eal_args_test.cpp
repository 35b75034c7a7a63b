#include <gtest/gtest.h>

#include "dataplane/dpdk/eal_args.hpp"

namespace rocemu::dpdk {
namespace {

using Args = std::vector<std::string>;

TEST(DpdkEalArgs, DefaultsNeedNoHugepagesNoPciAndAUniquePrefix) {
    const EalArgs a = make_eal_args({}, 4242);
    EXPECT_EQ(a.argv, (Args{"rocemu", "--no-huge", "-m", "512", "--no-pci", "--file-prefix", "rocemu-4242"}));
    EXPECT_EQ(a.file_prefix, "rocemu-4242");
}

TEST(DpdkEalArgs, UserArgumentsFollowAndReplaceTheDefaultsTheyOverlap) {
    const EalArgs a = make_eal_args({"--file-prefix=lab", "-m", "256", "--vdev", "net_ring0"}, 1);
    EXPECT_EQ(a.argv, (Args{"rocemu", "--no-huge", "--no-pci", "--file-prefix=lab", "-m", "256", "--vdev", "net_ring0"}));
    EXPECT_EQ(a.file_prefix, "lab");
    const EalArgs pci = make_eal_args({"-a", "0000:3b:00.0", "--file-prefix", "x"}, 1);
    EXPECT_EQ(pci.argv, (Args{"rocemu", "--no-huge", "-m", "512", "-a", "0000:3b:00.0", "--file-prefix", "x"}));
    EXPECT_EQ(pci.file_prefix, "x");
}

TEST(DpdkEalArgs, InMemoryMeansHugepagesAndNoPrefix) {
    const EalArgs a = make_eal_args({"--in-memory"}, 7);
    EXPECT_EQ(a.argv, (Args{"rocemu", "--no-pci", "--in-memory"}));
    EXPECT_TRUE(a.file_prefix.empty());
}

TEST(DpdkEalArgs, MemoryOptionInEveryForm) {
    for (const Args& a : {Args{"-m", "256"}, Args{"-m256"}, Args{"--socket-mem", "256"}, Args{"--socket-mem=256"}})
        EXPECT_TRUE(has_memory_option(a)) << a[0];
    EXPECT_FALSE(has_memory_option({"--in-memory", "--file-prefix", "m"}));
    EXPECT_FALSE(has_memory_option({"--socket-limit=256"}));
}

}  // namespace
}  // namespace rocemu::dpdk

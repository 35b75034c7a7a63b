// One EAL for every DPDK test of the executable, up before the first test
// and cleaned up after the last.
#include <gtest/gtest.h>

#include "dataplane/dpdk/eal.hpp"

namespace rocemu::dpdk {
namespace {

class EalEnvironment : public ::testing::Environment {
public:
    void SetUp() override {
        std::string error;
        ASSERT_TRUE(Eal::init({"--log-level", "lib.eal:error"}, error)) << error;
    }
    void TearDown() override { Eal::cleanup(); }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new EalEnvironment);

}  // namespace
}  // namespace rocemu::dpdk

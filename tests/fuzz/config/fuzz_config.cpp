// libFuzzer target: the YAML config loaders on arbitrary text. Every input
// goes to all four: the switch profile (sw::parse_switch_config), the link
// profile (sw::parse_link_config), the NIC congestion-control profile
// (cc::parse_cc_config, presets included) and the fabric file
// (fabric::parse_fabric_config, which also resolves the NIC and switch
// profiles it names, built in or relative to a source path that does not
// exist). Seeds: configs/ (scripts/fuzz.sh passes it).
// Invariants (abort on failure; an exception escaping a loader is a crash):
//   - a loader gives either a config or an error that says what is wrong,
//     never both and never neither;
//   - a switch or link config it accepts passes validate().
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cc/config.hpp"
#include "fabric/topology.hpp"
#include "link/link.hpp"
#include "switch/config.hpp"
#include "tests/fuzz/common/fuzz_input.hpp"

using namespace rocemu;

namespace {
[[noreturn]] void fail(const char* what) { fuzz::fail("fuzz_config", what); }
}  // namespace

// ASan records no allocation and free stacks here (malloc_context_size=0):
// yaml-cpp allocates a node for every token, four parses an input, and
// unwinding and storing each allocation's stack was a sixth of the run
// (perf), for a report's "allocated by"/"freed by" stacks only. What ASan
// detects is the same. For those stacks, replay the saved input with
// ASAN_OPTIONS=malloc_context_size=30 (the environment overrides this).
extern "C" const char* __asan_default_options() { return "malloc_context_size=0"; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    {
        const sw::ConfigResult r = sw::parse_switch_config(text);
        if (r.config.has_value() == !r.error.empty()) fail("switch: a config and an error, or neither");
        if (r.config && !sw::validate(*r.config).empty()) fail("switch: an accepted config fails validate()");
    }
    {
        const sw::LinkConfigResult r = sw::parse_link_config(text);
        if (r.config.has_value() == !r.error.empty()) fail("link: a config and an error, or neither");
        if (r.config && !link::validate(*r.config).empty()) fail("link: an accepted config fails validate()");
    }
    {
        const cc::CcConfigResult r = cc::parse_cc_config(text);
        (void)r.ok();
    }
    {
        const fabric::ConfigResult r = fabric::parse_fabric_config(text, "fuzz-no-such-dir/fabric.yaml");
        if (r.config.has_value() == !r.error.empty()) fail("fabric: a config and an error, or neither");
    }
    return 0;
}

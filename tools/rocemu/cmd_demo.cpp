// `rocemu demo`: the main job with no arguments. Runs the default scenario
// (ECMP vs spraying vs adaptive routing) on the embedded default fabric in
// virtual time, its hosts RC NICs posting RDMA WRITEs, prints its expectation, table and verdict, and points at the
// report folder (CSV time series, SVG plots).
#include <memory>
#include <string>

#include "fabric/scenario.hpp"
#include "tools/rocemu/commands.hpp"

namespace rocemu::cli {

int run_scenario_cli(const std::string& name, const fabric::ScenarioOptions& o, const char* me);

void add_demo_command(CLI::App& app, int& status) {
    auto o = std::make_shared<fabric::ScenarioOptions>();
    o->out_dir = "rocemu-report";
    CLI::App* cmd = app.add_subcommand(
        "demo", "Run the default scenario (ECMP vs spraying) on the embedded default fabric and write a report");
    cmd->add_option("-o,--out", o->out_dir, "report folder")->check(kNonEmpty)->capture_default_str();
    cmd->add_option("--seed", o->seed, "run seed")->check(kWholeNumber)->capture_default_str();
    cmd->add_flag("--reduced", o->reduced, "the CI size: smaller messages, 4 draws instead of 16");
    cmd->callback([o, &status] { status = run_scenario_cli("ecmp", *o, "rocemu demo"); });
}

}  // namespace rocemu::cli

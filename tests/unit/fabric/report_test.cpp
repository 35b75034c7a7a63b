// The report folder's manifest: a run's report replaces what earlier runs
// wrote there (and listed), and nothing else.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "fabric/report.hpp"

namespace rocemu::fabric {
namespace {

namespace fs = std::filesystem;

class ReportManifest : public ::testing::Test {
protected:
    void SetUp() override {
        root_ = fs::temp_directory_path() / ("rocemu_manifest_" + std::to_string(::getpid()) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(root_);
        dir_ = root_ / "report";
        fs::create_directories(dir_ / "sub");
    }
    void TearDown() override { fs::remove_all(root_); }

    static void touch(const fs::path& p) { std::ofstream(p) << "x\n"; }
    std::string in_dir(const std::string& name) const { return (dir_ / name).string(); }
    std::vector<std::string> manifest() const {
        std::vector<std::string> lines;
        std::ifstream in(dir_ / kReportManifest);
        for (std::string l; std::getline(in, l);) lines.push_back(l);
        return lines;
    }
    std::optional<std::size_t> replace(const std::vector<std::string>& files) {
        std::string err;
        const std::optional<std::size_t> n = replace_report(dir_.string(), files, err);
        EXPECT_TRUE(n.has_value()) << err;
        return n;
    }

    fs::path root_, dir_;
};

TEST_F(ReportManifest, AReportReplacesTheOneBeforeAndLeavesTheUsersFiles) {
    for (const char* f : {"incast_65536B_pfc.svg", "incast_65536B_flows.csv", "sub/flows.csv", "notes.txt"})
        touch(dir_ / f);
    ASSERT_EQ(replace({in_dir("incast_65536B_pfc.svg"), in_dir("incast_65536B_flows.csv"), in_dir("sub/flows.csv")}),
              std::optional<std::size_t>{0});
    EXPECT_EQ(manifest(),
              (std::vector<std::string>{"incast_65536B_flows.csv", "incast_65536B_pfc.svg", "sub/flows.csv"}));

    // The next run writes the flows CSV again, and no PFC plot.
    touch(dir_ / "incast_65536B_flows.csv");
    touch(dir_ / "incast_sweep.csv");
    EXPECT_EQ(replace({in_dir("incast_65536B_flows.csv"), in_dir("incast_sweep.csv")}), std::optional<std::size_t>{2});
    EXPECT_FALSE(fs::exists(dir_ / "incast_65536B_pfc.svg"));
    EXPECT_FALSE(fs::exists(dir_ / "sub" / "flows.csv"));
    EXPECT_TRUE(fs::exists(dir_ / "incast_65536B_flows.csv"));
    EXPECT_TRUE(fs::exists(dir_ / "incast_sweep.csv"));
    EXPECT_TRUE(fs::exists(dir_ / "notes.txt"));
    EXPECT_EQ(manifest(), (std::vector<std::string>{"incast_65536B_flows.csv", "incast_sweep.csv"}));
}

TEST_F(ReportManifest, RecordAddsToTheListOnceEach) {
    std::string err;
    ASSERT_TRUE(replace({in_dir("b.csv"), in_dir("a.csv")}).has_value());
    // A relative spelling of the same folder and a repeated file.
    const fs::path old = fs::current_path();
    fs::current_path(root_);
    ASSERT_TRUE(record_report("report", {"report/a.csv", "report/./c.pcap"}, err)) << err;
    fs::current_path(old);
    EXPECT_EQ(manifest(), (std::vector<std::string>{"a.csv", "b.csv", "c.pcap"}));
}

TEST_F(ReportManifest, FilesOutsideTheFolderAreNotListed) {
    ASSERT_TRUE(replace({(root_ / "elsewhere.csv").string(), in_dir("../x.csv"), in_dir(kReportManifest),
                         in_dir("in.csv")})
                    .has_value());
    EXPECT_EQ(manifest(), (std::vector<std::string>{"in.csv"}));
}

TEST_F(ReportManifest, NoLineOfAManifestRemovesWhatItCouldMisname) {
    touch(root_ / "outside.txt");
    touch(dir_ / "sub" / "kept.csv");
    fs::create_symlink(root_ / "outside.txt", dir_ / "link.csv");
    fs::create_directories(root_ / "elsewhere");
    touch(root_ / "elsewhere" / "far.csv");
    fs::create_directory_symlink(root_ / "elsewhere", dir_ / "linked");
    touch(dir_ / "ours.csv");
    {
        std::ofstream m(dir_ / kReportManifest);
        m << "../outside.txt\n" << (root_ / "outside.txt").string()
          << "\nsub\nlink.csv\n./sub/kept.csv\nlinked/far.csv\n\nours.csv\n";
    }
    EXPECT_EQ(replace({in_dir("new.csv")}), std::optional<std::size_t>{1});  // ours.csv alone
    EXPECT_FALSE(fs::exists(dir_ / "ours.csv"));
    EXPECT_TRUE(fs::exists(root_ / "outside.txt"));
    EXPECT_TRUE(fs::is_symlink(dir_ / "link.csv"));
    EXPECT_TRUE(fs::exists(root_ / "elsewhere" / "far.csv"));  // behind a linked folder
    EXPECT_TRUE(fs::is_directory(dir_ / "sub"));
    EXPECT_TRUE(fs::exists(dir_ / "sub" / "kept.csv"));
    EXPECT_EQ(manifest(), (std::vector<std::string>{"new.csv"}));
}

TEST_F(ReportManifest, WithoutAManifestNothingIsRemoved) {
    touch(dir_ / "a.csv");
    EXPECT_EQ(replace({in_dir("b.csv")}), std::optional<std::size_t>{0});
    EXPECT_TRUE(fs::exists(dir_ / "a.csv"));
    // An empty report: nothing left to list, no manifest.
    EXPECT_EQ(replace({}), std::optional<std::size_t>{0});
    EXPECT_FALSE(fs::exists(dir_ / kReportManifest));
    std::string err;
    EXPECT_EQ(replace_report("", {"a.csv"}, err), std::optional<std::size_t>{0});
    EXPECT_TRUE(record_report("", {"a.csv"}, err));
}

}  // namespace
}  // namespace rocemu::fabric

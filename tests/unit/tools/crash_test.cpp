// The fatal-signal report: what it prints, and that the process still dies
// of the signal it got.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>

#include "tools/rocemu/crash.hpp"

// Outside the anonymous namespace, so the export table (and the report) has
// its name.
[[gnu::noinline]] void crash_test_fault_at(volatile int* p) { *p = 1; }

namespace {

TEST(CrashReport, ASegfaultNamesSignalAddressAndBacktraceAndStillKills) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            rocemu::cli::install_crash_report("crash-test");
            crash_test_fault_at(reinterpret_cast<volatile int*>(0x10));
        },
        testing::KilledBySignal(SIGSEGV),
        "crash-test: fatal signal SIGSEGV at address 0x10 in thread [0-9]+; backtrace:\n.*crash_test_fault_at");
}

TEST(CrashReport, AnAbortIsReportedWithoutAnAddress) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            rocemu::cli::install_crash_report("crash-test");
            std::abort();
        },
        testing::KilledBySignal(SIGABRT), "crash-test: fatal signal SIGABRT in thread [0-9]+; backtrace:\n");
}

}  // namespace

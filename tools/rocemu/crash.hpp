// A fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) prints what it
// was, the faulting address and the thread's call stack to stderr before the
// process dies of it as it would have (core dump and exit status unchanged):
// a crash in a CI run or a user's lab then names its frame even where no core
// dump is kept. Addresses in the binary print as `rocemu(+0xOFFSET)`, which
// `addr2line -f -C -e rocemu 0xOFFSET` turns into a function and line.
#pragma once

namespace rocemu::cli {

// Installs the handlers (on an alternate stack, so a stack overflow reports
// too). `prog` names the process in the report; it must outlive the process.
void install_crash_report(const char* prog);

}  // namespace rocemu::cli

#pragma once
// A native stack for a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) on any
// thread. Python's faulthandler prints only the Python frames of Python threads, so a
// fault on one of a PJRT plugin's threads (as when a GPU plugin's start-up crashed) shows
// as the main thread's `import` line and nothing more. The handler writes the faulting
// thread's id, name and native frames to stderr, then hands the signal to whatever
// handler was there before (faulthandler's, or the default), so the exit status and
// Python's report stay what they were. TORCH_TPU_CRASH_REPORT=0 leaves the handlers alone.
namespace tpu::runtime {

// Installs the handler once per process (later calls do nothing). Reads
// TORCH_TPU_CRASH_REPORT; throws std::invalid_argument for a value other than 0 or 1.
void install_crash_report();

// Whether the handler is installed.
bool crash_report_installed();

}  // namespace tpu::runtime

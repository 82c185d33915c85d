// Default AddressSanitizer options of every executable in a HUMMING_SANITIZE build (the runtime
// calls this before it reads ASAN_OPTIONS, which still adds to or overrides what is here).
//
// intercept_tls_get_addr=0: with it on (ASan's default), gcc 12's LeakSanitizer records each
// dynamic TLS block that __tls_get_addr hands out and scans it at exit. It guesses a block's
// bounds from a glibc 2.19 header whenever the block's address is 16 past a page boundary; a
// block that ASan's malloc placed there has ASan's chunk header in front of it instead, so the
// guess yields a wild range and LeakSanitizer's tracer dies with "Tracer caught signal 11" in
// ScanRangeForPointers. NVRTC is dlopen'ed and has general-dynamic TLS, so whether a test hit
// this depended only on where its heap stood when NVRTC first ran (CI: the activation quantizer
// API test, every run). tests/sanitizer/dynamic_tls.cpp places a block there on purpose.
// Cost: pointers kept only in a dlopen'ed library's dynamic TLS are not roots, so they would be
// reported as leaks, never hidden; the library's own thread_locals are static TLS and are scanned.
extern "C" const char* __asan_default_options() { return "intercept_tls_get_addr=0"; }

// A dlopen'ed module with general-dynamic TLS of 32 bytes, as NVRTC has: its block comes from
// malloc when a thread first touches it (tests/sanitizer/dynamic_tls.cpp).
extern "C" {
__attribute__((visibility("default"))) __thread void* hm_dynamic_tls_slots[4];
__attribute__((visibility("default"))) void* hm_dynamic_tls_address() {
  return &hm_dynamic_tls_slots[0];
}
}

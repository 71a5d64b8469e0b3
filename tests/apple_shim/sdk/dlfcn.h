/* Darwin stand-in (tests/apple_shim/sdk/README). */
#ifndef STKR_SHIM_DLFCN_H
#define STKR_SHIM_DLFCN_H
#define RTLD_DEFAULT ((void *)-2)
void *dlsym(void *handle, const char *symbol);
#endif

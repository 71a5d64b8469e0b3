/* Stand-in for the SDK's <objc/runtime.h>: the declarations
 * symbolize/symbolize_apple.c uses, copied by hand from Apple's objc4 headers
 * (objc.h, runtime.h). BOOL is bool on arm64 and signed char on x86_64, as
 * in objc.h; the typed objc_msgSend casts depend on it. */
#ifndef STKR_SHIM_OBJC_RUNTIME_H
#define STKR_SHIM_OBJC_RUNTIME_H
#include <stdbool.h>
typedef struct objc_class *Class;
typedef struct objc_object *id;
typedef struct objc_selector *SEL;
#if defined(__arm64__)
typedef bool BOOL;
#else
typedef signed char BOOL;
#endif
Class objc_getClass(const char *name);
SEL sel_registerName(const char *str);
Class object_getClass(id obj);
BOOL class_respondsToSelector(Class cls, SEL sel);
#endif

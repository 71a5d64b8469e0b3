/* Stand-in for the SDK's <mach-o/loader.h>: the declarations
 * flush/images_apple.c uses, copied by hand from Apple's headers. */
#ifndef STKR_SHIM_MACHO_LOADER_H
#define STKR_SHIM_MACHO_LOADER_H
#include <stdint.h>
typedef int cpu_type_t;
typedef int cpu_subtype_t;
typedef int vm_prot_t;
struct mach_header {
  uint32_t magic; cpu_type_t cputype; cpu_subtype_t cpusubtype;
  uint32_t filetype, ncmds, sizeofcmds, flags;
};
struct mach_header_64 {
  uint32_t magic; cpu_type_t cputype; cpu_subtype_t cpusubtype;
  uint32_t filetype, ncmds, sizeofcmds, flags, reserved;
};
#define MH_MAGIC_64 0xfeedfacf
struct load_command { uint32_t cmd, cmdsize; };
#define LC_SEGMENT_64 0x19
#define LC_UUID 0x1b
struct segment_command_64 {
  uint32_t cmd, cmdsize; char segname[16];
  uint64_t vmaddr, vmsize, fileoff, filesize;
  vm_prot_t maxprot, initprot; uint32_t nsects, flags;
};
struct uuid_command { uint32_t cmd, cmdsize; uint8_t uuid[16]; };
#endif

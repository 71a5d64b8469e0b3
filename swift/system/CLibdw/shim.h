#include <elfutils/libdw.h>
#include <libelf.h>

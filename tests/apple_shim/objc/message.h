/* Stand-in for the SDK's <objc/message.h>. With OBJC_OLD_DISPATCH_PROTOTYPES
 * off (the default, and the only choice on arm64) objc_msgSend is declared
 * without parameters and must be cast to the exact method type before the
 * call; declaring it so here makes an uncast call fail the check. */
#ifndef STKR_SHIM_OBJC_MESSAGE_H
#define STKR_SHIM_OBJC_MESSAGE_H
#include <objc/runtime.h>
void objc_msgSend(void);
#endif

/* Test-harness glue for the lent H200 only, not part of torchbisect.
 *
 * The device image ships an NCCL older than the one torch 2.12-2.15 wheels link against, so
 * `import torch` fails on missing symbols.  The probes never call NCCL: LD_PRELOAD this stub so
 * the dynamic loader resolves them.  Each returns 3 (ncclInternalError) should anything call it.
 */
#define STUB(name) int name(void) { return 3; }
STUB(ncclCommMemStats)
STUB(ncclCommResume)
STUB(ncclCommSuspend)
STUB(ncclGetLsaMultimemDevicePointer)
STUB(ncclGetPeerDevicePointer)
STUB(ncclPutSignal)
STUB(ncclSignal)
STUB(ncclWaitSignal)
STUB(ncclCommGetUniqueId)
STUB(ncclCommGrow)
STUB(ncclWinGetUserPtr)

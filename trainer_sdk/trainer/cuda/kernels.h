// CUDA kernels of the reference trainer: the device twins of ops.cc, one
// launcher per kernel, each enqueued on `stream` and returning the launch
// status (cudaSuccess or the launch error; execution errors surface at the
// next synchronizing call). Layouts follow ops.h (NCHW, OIHW); the matrix
// products (convolutions, linear layers) are not here but in
// cuda_backend.cc, on cuBLAS or cuDNN.
//
// Reductions are tree-shaped (not the CPU's order), so results match the CPU
// to rounding, not bitwise; each launch's reduction order is fixed by its
// shape, so a run is reproducible on the same GPU.
//
// Thread safety: launchers keep no state.
#ifndef HYPERTUNE_TRAINER_SDK_TRAINER_CUDA_KERNELS_H_
#define HYPERTUNE_TRAINER_SDK_TRAINER_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "trainer_sdk/trainer/ops.h"

namespace hypertune::train::cuda {

// --- Convolution helpers (im2col path) -------------------------------------

// col [in_c * k * k][images * P] (P = out_h * out_w; image g occupies columns
// [g * P, (g + 1) * P)) from `images` NCHW images starting at `in`.
cudaError_t Im2Col(float* col, const float* in, const ConvShape& s, int images,
                   cudaStream_t stream);
// d_in (overwritten, `images` NCHW images) = the adjoint of Im2Col applied to
// dcol [images][in_c * k * k][P]; a gather, so no atomics.
cudaError_t Col2Im(float* d_in, const float* dcol, const ConvShape& s,
                   int images, cudaStream_t stream);
// dst [c][images * plane] <- src [images][c][plane].
cudaError_t ChannelMajor(float* dst, const float* src, int images, int c,
                         int plane, cudaStream_t stream);

// --- Batch norm --------------------------------------------------------------

// How many blocks share one channel's reduction for this shape.
int BatchNormSplits(const BatchNormShape& s);
// Bytes of scratch the batch-norm launchers below need (partial sums and
// per-channel coefficients).
size_t BatchNormScratchBytes(const BatchNormShape& s);

// ops.h BatchNormForwardTrain; `scratch` of BatchNormScratchBytes(s).
cudaError_t BatchNormForwardTrain(float* out, float* save_mean,
                                  float* save_inv_std, float* running_mean,
                                  float* running_var, const float* in,
                                  const float* gamma, const float* beta,
                                  const float* residual, bool relu,
                                  const BatchNormShape& s, void* scratch,
                                  cudaStream_t stream);
// ops.h BatchNormForwardEval; `scratch` of BatchNormScratchBytes(s).
cudaError_t BatchNormForwardEval(
    float* out, const float* in, const float* gamma, const float* beta,
    const float* running_mean, const float* running_var, const float* residual,
    bool relu, const BatchNormShape& s, void* scratch, cudaStream_t stream);
// ops.h BatchNormBackward; `scratch` of BatchNormScratchBytes(s).
cudaError_t BatchNormBackward(float* d_in, float* d_gamma, float* d_beta,
                              const float* d_out, const float* in,
                              const float* gamma, const float* save_mean,
                              const float* save_inv_std,
                              const BatchNormShape& s, void* scratch,
                              cudaStream_t stream);

// --- Elementwise, pooling, loss, optimizer -----------------------------------

cudaError_t ReluForward(float* out, const float* in, size_t count,
                        cudaStream_t stream);
cudaError_t ReluBackward(float* d_in, const float* d_out, const float* out,
                         size_t count, cudaStream_t stream);
cudaError_t AddInPlace(float* y, const float* x, size_t count,
                       cudaStream_t stream);
cudaError_t MaxPoolForward(float* out, int32_t* argmax, const float* in,
                           const PoolShape& s, cudaStream_t stream);
cudaError_t MaxPoolBackward(float* d_in, const float* d_out,
                            const int32_t* argmax, const PoolShape& s,
                            cudaStream_t stream);
cudaError_t GlobalAvgPoolForward(float* out, const float* in, int n, int c,
                                 int hw, cudaStream_t stream);
cudaError_t GlobalAvgPoolBackward(float* d_in, const float* d_out, int n, int c,
                                  int hw, cudaStream_t stream);
// out [n][f] = bias[f] (0 where bias is null).
cudaError_t BroadcastRows(float* out, const float* bias, int n, int f,
                          cudaStream_t stream);
// d_bias [f] = sum over rows of d_out [n][f].
cudaError_t SumRows(float* d_bias, const float* d_out, int n, int f,
                    cudaStream_t stream);
cudaError_t SoftmaxCrossEntropy(float* losses, float* d_logits,
                                const float* logits, const int32_t* labels,
                                int n, int k, float smoothing,
                                cudaStream_t stream);
cudaError_t SgdUpdate(float* param, float* velocity, const float* grad,
                      size_t count, const SgdStep& step, cudaStream_t stream);

}  // namespace hypertune::train::cuda

#endif  // HYPERTUNE_TRAINER_SDK_TRAINER_CUDA_KERNELS_H_

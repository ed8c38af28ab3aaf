"""Newton-Schulz orthogonalisation of a batch of same-shape matrices, and its FLOP count.

In: a tensor `[batch, rows, cols]` (the momentum matrices Muon wants to orthogonalise).
Out: a tensor of the same shape and dtype whose matrices are approximately `U V^T` of their
SVD (singular values pushed into roughly [0.7, 1.2]), after five quintic iterations with the
coefficients (3.4445, -4.7750, 2.0315) of Keller Jordan's Muon.

Matrices are transposed so rows <= cols: the Gram matrix `X X^T` is then the small one, which
is both cheaper and what the coefficients were tuned for. The work runs in `dtype` (fp32 on
CPU, bf16 on GPU by the optimizer's choice) with one batched matmul per product, so packing
many experts of the same shape into one call is what makes the GPU path fast.
"""

from __future__ import annotations

NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)


def newton_schulz(g, steps: int = 5, dtype=None, eps: float = 1e-7):
    """Orthogonalise every matrix of `g` (`[batch, rows, cols]` or `[rows, cols]`)."""
    import torch

    squeeze = g.dim() == 2
    x = g.unsqueeze(0) if squeeze else g
    if x.dim() != 3:
        raise ValueError(f"newton_schulz wants [batch, rows, cols] or [rows, cols], got {tuple(g.shape)}")
    out_dtype = x.dtype
    x = x.to(dtype or x.dtype)
    transposed = x.size(1) > x.size(2)
    if transposed:
        x = x.transpose(1, 2)
    # Normalise each matrix by its Frobenius norm so the spectral norm is at most 1.
    x = x / (torch.linalg.vector_norm(x, dim=(1, 2), keepdim=True) + eps)
    a, b, c = NS_COEFFICIENTS
    for _ in range(steps):
        gram = torch.bmm(x, x.transpose(1, 2))
        poly = torch.baddbmm(gram, gram, gram, beta=b, alpha=c)
        x = torch.baddbmm(x, poly, x, beta=a, alpha=1.0)
    if transposed:
        x = x.transpose(1, 2)
    x = x.to(out_dtype)
    return x.squeeze(0) if squeeze else x


def muon_scale(rows: int, cols: int) -> float:
    """Update scale that matches AdamW's update RMS (Moonlight): 0.2 * sqrt(max(rows, cols))."""
    return 0.2 * max(rows, cols) ** 0.5


def newton_schulz_flops(rows: int, cols: int, steps: int = 5) -> int:
    """Multiply-add FLOPs (2 per MAC) of `newton_schulz` on one `rows x cols` matrix.

    Per step with r = min(rows, cols), c = max(rows, cols): X X^T costs 2 r^2 c, the square of
    the Gram matrix 2 r^3, and the product with X another 2 r^2 c.
    """
    r, c = min(rows, cols), max(rows, cols)
    return steps * (4 * r * r * c + 2 * r * r * r)

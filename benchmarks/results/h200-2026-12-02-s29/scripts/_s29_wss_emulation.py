# s29: run with python3 (numpy); prints the emulated relative error of _s29_wss.py's index mapping (4e-7 in s29)
# numpy emulation of _s29_wss.py's data flow (smem layouts as the kernel writes them; wgmma reading K-major no-swizzle
# with LBO = k-half stride, SBO = 8-row-group stride) for one block (128 rows) and K = 256
import numpy as np
rng = np.random.default_rng(0)
K, NR, M = 256, 128, 32
nch = K // 32; nsteps = nch // 4
q = rng.integers(0, 256, size=(NR, nch, 16), dtype=np.uint8)
d = (rng.random((NR, nch)) * 0.02 + 0.005).astype(np.float16)
x = rng.standard_normal((M, K)).astype(np.float16)
# reference W (GGUF q4_0: byte b lo nibble -> k = b, hi -> k = b + 16)
W = np.zeros((NR, K), np.float32)
for r in range(NR):
    for c in range(nch):
        for b in range(16):
            W[r, 32*c + b] = (int(q[r, c, b]) & 15) - 8
            W[r, 32*c + b + 16] = (int(q[r, c, b]) >> 4) - 8
        W[r, 32*c:32*c+32] = (W[r, 32*c:32*c+32].astype(np.float16) * d[r, c]).astype(np.float16)
ref = x.astype(np.float32) @ W.T  # [M, NR]

def q4_0_word_k(j):  # real k (within the chunk) of the 8 halves p0.lo p0.hi p1.lo ... p3.hi of word j
    return [4*j, 4*j+2, 4*j+16, 4*j+18, 4*j+1, 4*j+3, 4*j+17, 4*j+19]

D = np.zeros((NR, M), np.float32)
for st in range(nsteps):
    A = np.zeros(32768 // 2, np.float16)  # halves
    B = np.zeros(8192 // 2, np.float16)
    for r in range(NR):
        for c in range(4):
            for j in range(4):
                s, h = 2*c + (j >> 1), j & 1
                base = (s*4096 + (r >> 3)*256 + h*128 + (r & 7)*16) // 2
                for kk, k in enumerate(q4_0_word_k(j)):
                    A[base + kk] = W[r, 128*st + 32*c + k]
    for tt in range(128):
        xn, xc = tt & 31, tt >> 5
        X = x[min(xn, M-1), 128*st + 32*xc: 128*st + 32*xc + 32]
        for j in range(4):
            s, h = 2*xc + (j >> 1), j & 1
            base = (s*1024 + (xn >> 3)*256 + h*128 + (xn & 7)*16) // 2
            row = [X[4*j], X[4*j+2], X[4*j+16], X[4*j+18], X[4*j+1], X[4*j+3], X[4*j+17], X[4*j+19]]
            B[base:base+8] = row
    # wgmma m64n32k16, K-major both: element (m, k) of A at base + (m//8)*SBO + (k//8)*LBO + (m%8)*16 + (k%8)*2 bytes
    for s in range(8):
        for T in range(2):
            abase = s*4096 + T*2048
            a = np.zeros((64, 16), np.float32); b = np.zeros((32, 16), np.float32)
            for m in range(64):
                for k in range(16):
                    a[m, k] = A[(abase + (m//8)*256 + (k//8)*128 + (m%8)*16 + (k%8)*2)//2]
            for n in range(32):
                for k in range(16):
                    b[n, k] = B[(s*1024 + (n//8)*256 + (k//8)*128 + (n%8)*16 + (k%8)*2)//2]
            D[T*64:(T+1)*64] += a @ b.T
err = np.abs(D.T - ref).max() / np.abs(ref).max()
print("emulated rel err", err)

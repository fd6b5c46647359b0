"""ESMFold2 (Biohub, 2026): an all-atom diffusion structure model on the ESM C 6B language model,
ported from transformers' ``models/esmfold2``. ``config`` holds its shape, ``layers`` the shared
blocks, ``atoms``/``embedder``/``diffusion`` the atom stack, the input embedder and the denoiser;
docs/esmfold.md ("ESMFold2") says what exists."""

"""What more than one backend uses: kernel normalisation, math expansion and vector math, the
contraction description, addressing, the launch record and export entries, reduction cascades
and parallel code generation. It imports no backend, and no backend imports another."""

//! Benchmark of `stockade-lock` against `rslock` (work in progress: the
//! harness lands in the next commit).

// Public entry of @kernelwarden/r-kernel; its content lands with the package's own issue.
export {};

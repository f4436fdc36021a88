// Public entry of @kernelwarden/isolation; its content lands with the package's own issue.
export {};

// Public entry of @kernelwarden/cli; its content lands with the package's own issue.
export {};

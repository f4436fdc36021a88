// Public entry of @kernelwarden/supervisor; its content lands with the package's own issue.
export {};

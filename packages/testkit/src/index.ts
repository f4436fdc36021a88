// Public entry of @kernelwarden/testkit; its content lands with the package's own issue.
export {};

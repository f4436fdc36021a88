// Public entry of @kernelwarden/gateway-client; its content lands with the package's own issue.
export {};

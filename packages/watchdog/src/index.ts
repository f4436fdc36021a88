// Public entry of @kernelwarden/watchdog; its content lands with the package's own issue.
export {};

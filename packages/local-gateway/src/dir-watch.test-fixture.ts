// Test fixture (not exported): counts the calls of a directory watch's callback and awaits the next one.

/** `callback` counts its calls (`calls()`); `next()` resolves at the next one, rejecting after 5 s without one. */
export function callRecorder(): { callback(): void; calls(): number; next(): Promise<void> } {
  let calls = 0;
  let called: () => void = () => {};
  return {
    callback: () => {
      calls++;
      called();
    },
    calls: () => calls,
    next: () =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no call within 5 s')), 5000);
        called = () => {
          clearTimeout(timer);
          resolve();
        };
      }),
  };
}

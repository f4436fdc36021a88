// @jupyterlab/services logs its connection chatter ("Starting WebSocket…", "Kernel: dead…") through console.log /
// console.debug. The bench writes its own output with process.stdout / process.stderr, so it silences those two
// (and console.info) on import; warnings and errors still reach stderr.
const silent = () => {};
console.log = silent;
console.info = silent;
console.debug = silent;

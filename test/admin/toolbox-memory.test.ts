import { memoryStore } from './stores.js';
import { toolboxSuite } from './toolbox-suite.js';

toolboxSuite('memory', async () => memoryStore());

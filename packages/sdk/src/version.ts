/** This package's version (package.json's; a test keeps the two equal), sent in the User-Agent. */
export const VERSION = '0.1.0';

export type KeyMode = 'live' | 'test';

/* The fixture "SDK" (libacme_sdk.so): what a third-party analytics SDK
 * does behind the app's back. */
#ifndef ACME_SDK_H
#define ACME_SDK_H

/* Reads the device id (/etc/machine-id): identifiers.open. */
void acme_fingerprint(void);
/* Asks a "location service" (a connect to 127.0.0.1, refused):
 * network.connect. */
void acme_location(void);
/* File timestamps and free disk space: 2 stat, 1 statfs
 * (reasons.stat, reasons.statfs). */
void acme_disk_probe(void);

#endif

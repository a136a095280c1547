"""The Spark session and the processes squall runs in: starting the JVM quietly,
checking masters, the Python workers' launcher, their logging and set-up, and what the
session runs on."""

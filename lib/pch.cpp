// Carries the precompiled header shared by the ATen-using areas (see CMakeLists.txt).

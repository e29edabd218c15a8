/* Stands in for a stage folder with no sources yet (see CMakeLists.txt). */
typedef int mt_empty_stage_;

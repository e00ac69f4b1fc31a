plugins {
    id("com.android.application")
    id("org.jetbrains.kotlin.android")
}

android {
    namespace = "dev.edgelite.android"
    compileSdk = 35

    defaultConfig {
        applicationId = "dev.edgelite.android"
        minSdk = 24
        targetSdk = 35
        versionCode = 1
        versionName = "0.1.0"
    }
    buildTypes {
        release {
            isMinifyEnabled = false
        }
    }
    compileOptions {
        sourceCompatibility = JavaVersion.VERSION_17
        targetCompatibility = JavaVersion.VERSION_17
    }
    kotlinOptions {
        jvmTarget = "17"
    }
    // The models are memory-mapped from the APK (AssetManager.openFd): stored, not compressed.
    androidResources {
        noCompress += "tflite"
    }
}

dependencies {
    // Stock LiteRT: org.tensorflow.lite.Interpreter with runSignature (signatures, resource
    // variables); nothing of edgelite runs on the phone.
    implementation("com.google.ai.edge.litert:litert:1.4.0")
    implementation("androidx.core:core-ktx:1.13.1")
    implementation("androidx.activity:activity-ktx:1.9.3")
    val camerax = "1.4.2"
    implementation("androidx.camera:camera-core:$camerax")
    implementation("androidx.camera:camera-camera2:$camerax")
    implementation("androidx.camera:camera-lifecycle:$camerax")
    implementation("androidx.camera:camera-view:$camerax")
}

// The models are not in git: samples/android/make_assets.py writes them (README: step 2).
val checkAssets by tasks.registering {
    doLast {
        val missing = listOf("text_direction.tflite", "shapes_personalize.tflite")
            .filter { !file("src/main/assets/$it").exists() }
        check(missing.isEmpty()) {
            "missing assets $missing: run `python samples/android/make_assets.py` from the " +
                "edgelite repository first"
        }
    }
}
tasks.named("preBuild") { dependsOn(checkAssets) }
